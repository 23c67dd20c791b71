"""SQLite-specific behaviour: file recognition, schema versions, WAL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstrata.errors import NotOurDatabase, SchemaTooNew
from memstrata.store.sqlite import SQLiteStore, schema


def test_new_file_is_created_migrated_and_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "m.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == schema.APPLICATION_ID
        rows = conn.execute("SELECT version, name FROM schema_migrations").fetchall()
        assert rows == [
            (1, "data model"),
            (2, "page segments"),
            (3, "llm usage"),
            (4, "per-cube index terms"),
            (5, "speaker index"),
            (6, "session order index"),
            (7, "llm usage per day"),
            (8, "item expiry"),
            (9, "tool, skill and image memory"),
            (10, "item versions by cube"),
        ]
    finally:
        conn.close()
    SQLiteStore(path).close()  # reopening migrates nothing and works


def test_a_version_1_file_is_migrated_forward_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
    conn.execute("BEGIN")
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
    )
    schema._v1(conn)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'data model', 0)")
    conn.execute("INSERT INTO users VALUES ('old', NULL, 'user', 0)")
    conn.execute("INSERT INTO cubes VALUES ('c', 'c', 'old', 'user', '{}', 'm/4', 0)")
    conn.execute(
        "INSERT INTO items (rid, id, cube_id, version, tier, type, status, text, event_time,"
        " created_at, updated_at, seq) VALUES (1, 'i1', 'c', 1, 'working', 'turn', 'generated',"
        " 'an old hiking memory', 0, 0, 0, 1)"
    )
    conn.execute(
        "INSERT INTO items_fts (rowid, body, cube) VALUES (1, 'an old hiking memory', 'c')"
    )
    conn.execute("COMMIT")
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.get_user("old") is not None
        assert schema.current_version(store.reader()) == schema.LATEST
        columns = [r[1] for r in store.reader().execute("PRAGMA table_info(items)")]
        assert "segment_id" in columns
        from memstrata.filters import Filters

        # the full-text index was rebuilt with per-cube terms (migration 4)
        assert [i for i, _ in store.keyword_search("hiking", ["c"], Filters(), 5)] == ["i1"]
    finally:
        store.close()


def test_empty_file_is_initialised(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    SQLiteStore(path).close()
    assert path.stat().st_size > 0


def test_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hello, I am a text file and not a database at all" * 20)
    before = path.read_bytes()
    with pytest.raises(NotOurDatabase, match="not a memstrata database"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(NotOurDatabase, match="another application"):
        SQLiteStore(path)
    conn = sqlite3.connect(path)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    conn.close()
    assert names == ["accounts"]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 0)", (99,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew, match="schema version 99") as info:
        SQLiteStore(path)
    assert "upgrade memstrata" in str(info.value)


def test_keyword_channel_keeps_the_rarest_terms_within_its_budget(tmp_path: Path) -> None:
    import numpy as np

    from memstrata.filters import Filters
    from memstrata.model import Cube, MemoryItem, User, new_id

    store = SQLiteStore(tmp_path / "b.db", keyword_max_postings=3)
    try:
        store.put_user(User("u"))
        for cube in ("a", "b"):
            store.put_cube(Cube(cube, cube, owner="u"))
        texts = ["common rare", "common one", "common two", "common three"]
        items = [MemoryItem(id=new_id(), cube_id="a", text=t) for t in texts]
        items.append(MemoryItem(id=new_id(), cube_id="b", text="rare in b"))
        store.add_items(items, np.ones((5, 4), np.float32), "m/4")
        # "common" has 4 matches in cube a: over the budget once "rare" (1) is kept
        hits = store.keyword_search("common rare", ["a"], Filters(), 10)
        assert [i for i, _ in hits] == [items[0].id]
        # alone, a term over the budget is still searched
        assert len(store.keyword_search("common", ["a"], Filters(), 10)) == 4
        # cube b's copy of "rare" neither counts against cube a nor shows up there
        assert len(store.keyword_search("rare", ["a", "b"], Filters(), 10)) == 2
    finally:
        store.close()
