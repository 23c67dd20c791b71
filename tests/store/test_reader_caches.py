"""What a per-thread read connection of ``SQLiteDatabase`` may cache is bounded: a server has up
to 40 of them, so their prepared statements and pages are multiplied by 40 (``bench/soak.py``
saw the server's RSS grow with them)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from memstrata.store.sqlite import SQLiteStore
from memstrata.store.sqlite.connection import (
    READER_CACHE_KIB,
    READER_CACHED_STATEMENTS,
    memory_uri,
)


def statements() -> int:
    """Prepared statements alive in this process (``sqlite3``'s statement objects)."""
    return sum(type(o).__name__ == "Statement" for o in gc.get_objects())


def test_a_reader_keeps_a_bounded_number_of_statements(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "statements.db")
    try:
        reader = store.reader()
        before = statements()
        for n in range(100):  # 100 distinct statements: all kept at Python's default of 128
            reader.execute(f"SELECT {n}").fetchone()
        assert statements() - before <= READER_CACHED_STATEMENTS < 100
    finally:
        store.close()


def test_a_list_of_ids_of_any_length_is_one_statement(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lists.db")
    try:
        store.get_items(["warm"], ["cube"])
        store.next_turns("cube", ["warm"])
        before = statements()
        for n in range(1, 101):
            listed = [f"missing-{i}" for i in range(n)]
            assert store.get_items(listed, ["cube"]) == []
            assert store.next_turns("cube", listed) == {}
        assert statements() == before
    finally:
        store.close()


def test_a_reader_has_a_smaller_page_cache_than_the_writer(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "pages.db")
    try:
        assert store.reader().execute("PRAGMA cache_size").fetchone()[0] == -READER_CACHE_KIB
        with store.transaction() as writer:
            assert writer.execute("PRAGMA cache_size").fetchone()[0] == -2000  # SQLite's default
    finally:
        store.close()


def test_an_in_memory_database_keeps_its_cache(tmp_path: Path) -> None:
    store = SQLiteStore(memory_uri())
    found: list[int] = []
    try:
        thread = threading.Thread(
            target=lambda: found.append(store.reader().execute("PRAGMA cache_size").fetchone()[0])
        )
        thread.start()
        thread.join()
        assert found == [-2000]
    finally:
        store.close()
