"""Item keys that name the cube (issue 28): on PostgreSQL ``items`` is keyed ``(cube_id, id)`` and
``item_versions`` ``(cube_id, item_id, version)``, so a sharded PostgreSQL can distribute both by
cube; a database of the version before migrates forward keeping its rows.  SQLite keeps its keys
(one file is never sharded) but its versions hold their cube too, so one SQL layer names the cube
on both engines.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memstrata.errors import ItemNotFound
from memstrata.model import Cube, MemoryItem, User
from memstrata.store import rows
from memstrata.store.base import Store
from memstrata.store.postgres import schema as pg_schema
from memstrata.store.sqlite import SQLiteStore
from memstrata.store.sqlite import schema as sqlite_schema
from tests.services import fresh_database
from tests.store.backends import ENGINES, open_backend
from tests.store.test_conformance import FP, add, item, unit


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database() as found:
        yield found


def primary_key(conn: Any, table: str) -> list[str]:
    """The columns of ``table``'s primary key, in key order, as the catalog has them."""
    found = conn.execute(
        "SELECT a.attname FROM pg_constraint c "
        "CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k (attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum "
        "WHERE c.conrelid = %s::regclass AND c.contype = 'p' ORDER BY k.n",
        (table,),
    ).fetchall()
    return [r[0] for r in found]


def index_columns(conn: Any, index: str) -> list[str]:
    """The columns of ``index`` in order, and whether it is unique, from ``pg_index``."""
    found = conn.execute(
        "SELECT a.attname FROM pg_index x "
        "CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k (attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum "
        "WHERE x.indexrelid = %s::regclass ORDER BY k.n",
        (index,),
    ).fetchall()
    return [r[0] for r in found]


def check_keys(conn: Any) -> None:
    assert primary_key(conn, "items") == ["cube_id", "id"]
    assert primary_key(conn, "item_versions") == ["cube_id", "item_id", "version"]
    # The id → cube lookup's index is plain: ids are unique per cube, not checked across cubes.
    unique = conn.execute(
        "SELECT indisunique FROM pg_index WHERE indexrelid = 'items_id'::regclass"
    ).fetchone()[0]
    assert index_columns(conn, "items_id") == ["id"] and not unique
    # No other key or foreign key names an item by id alone.
    others = conn.execute(
        "SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u', 'f') "
        "AND conrelid IN ('items'::regclass, 'item_versions'::regclass) "
        "AND conname NOT IN ('items_pkey', 'item_versions_pkey', 'items_cube_id_fkey')"
    ).fetchall()
    assert others == []


def test_postgres_items_and_versions_are_keyed_by_cube(dsn: str) -> None:
    import psycopg

    from memstrata.store.postgres import PostgresStore

    PostgresStore(dsn).close()
    with psycopg.connect(dsn) as conn:
        check_keys(conn)


ITEM = (
    "INSERT INTO items (id, cube_id, version, tier, type, status, text, event_time, created_at,"
    " updated_at, seq, tsv, doclen) VALUES (%s, %s, %s, 'working', 'turn', 'generated', %s, 0, 0,"
    " 0, nextval('item_seq'), to_tsvector('english', %s), 3)"
)


def snapshot(item_id: str, cube_id: str, version: int, text: str) -> str:
    """A version snapshot as the store writes one."""
    return rows.dumps(rows.item_to_dict(MemoryItem(item_id, cube_id, text, version=version)))


def test_a_version_4_postgres_database_migrates_its_item_keys_keeping_its_rows(dsn: str) -> None:
    import psycopg

    from memstrata.store.postgres import PostgresStore

    with psycopg.connect(dsn) as conn:  # the schema as version 4 left it, with rows
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at DOUBLE PRECISION NOT NULL)"
        )
        for version in range(1, 5):
            name, script = pg_schema.MIGRATIONS[version]
            for statement in pg_schema.statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (%s, %s, 0)", (version, name))
        conn.execute("INSERT INTO users VALUES ('old', NULL, 'user', 0)")
        for cube in ("c1", "c2"):
            conn.execute("INSERT INTO cubes VALUES (%s, %s, 'old', 'user', '{}', NULL, 0)",
                         (cube, cube))  # fmt: skip
        conn.execute(ITEM, ("i1", "c1", 2, "hiking in the alps", "hiking in the alps"))
        conn.execute(ITEM, ("i2", "c2", 1, "a sailing memory", "a sailing memory"))
        for item_id, cube, version, text in (
            ("i1", "c1", 1, "hiking"), ("i1", "c1", 2, "hiking in the alps"),
            ("i2", "c2", 1, "a sailing memory"), ("gone", "c2", 1, "erased item's version"),
        ):  # fmt: skip
            conn.execute(
                "INSERT INTO item_versions (item_id, version, snapshot, at) VALUES (%s, %s, %s, 0)",
                (item_id, version, snapshot(item_id, cube, version, text)),
            )
    store = PostgresStore(dsn)
    try:
        with psycopg.connect(dsn) as conn:
            assert pg_schema.current_version(conn) == pg_schema.LATEST == 5
            check_keys(conn)
            versions = conn.execute(
                "SELECT cube_id, item_id, version FROM item_versions ORDER BY item_id, version"
            ).fetchall()
        assert versions == [("c2", "gone", 1), ("c1", "i1", 1), ("c1", "i1", 2), ("c2", "i2", 1)]
        assert [i.text for i in store.get_items(["i2", "i1"], ["c1", "c2"])] == [
            "a sailing memory", "hiking in the alps",
        ]  # fmt: skip
        assert [v.item.text for v in store.versions("c1", "i1")] == ["hiking", "hiking in the alps"]
        assert store.item_cubes(["i1", "i2", "nope"]) == {"i1": "c1", "i2": "c2"}
    finally:
        store.close()


def test_a_version_9_sqlite_file_gives_its_versions_their_cube(tmp_path: Path) -> None:
    path = tmp_path / "v9.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")  # back to version 9: versions without their cube
    conn.execute("DELETE FROM schema_migrations WHERE version > 9")
    conn.execute("ALTER TABLE item_versions DROP COLUMN cube_id")
    conn.execute("INSERT INTO users VALUES ('old', NULL, 'user', 0)")
    conn.execute("INSERT INTO cubes VALUES ('c1', 'c1', 'old', 'user', '{}', NULL, 0)")
    conn.execute(
        "INSERT INTO items (rid, id, cube_id, version, tier, type, status, text, event_time,"
        " created_at, updated_at, seq) VALUES (1, 'i1', 'c1', 1, 'working', 'turn', 'generated',"
        " 'hiking', 0, 0, 0, 1)"
    )
    for item_id, cube in (("i1", "c1"), ("gone", "c9")):
        conn.execute("INSERT INTO item_versions VALUES (?, 1, ?, 0, NULL, NULL)",
                     (item_id, snapshot(item_id, cube, 1, "hiking")))  # fmt: skip
    conn.execute("COMMIT")
    conn.close()
    store = SQLiteStore(path)
    try:
        assert sqlite_schema.current_version(store.reader()) == sqlite_schema.LATEST
        found = (
            store.reader()
            .execute("SELECT cube_id, item_id FROM item_versions ORDER BY item_id")
            .fetchall()
        )
        assert [tuple(r) for r in found] == [("c9", "gone"), ("c1", "i1")]
        assert [v.item.text for v in store.versions("c1", "i1")] == ["hiking"]
    finally:
        store.close()


@pytest.fixture
def two_cubes(engine: str, tmp_path: Path) -> Iterator[Store]:
    with open_backend(engine, tmp_path) as backend:
        store = backend.open()
        for user, cube in (("u1", "c1"), ("u2", "c2")):
            store.put_user(User(user))
            store.put_cube(Cube(cube, cube, owner=user, embedder=FP))
        yield store


@pytest.mark.engines(*ENGINES)
def test_item_calls_name_the_cube_and_an_item_of_another_cube_is_unknown(two_cubes: Store) -> None:
    """Issue 28: every item call names its cube (a sharded store routes by it); an item of
    another cube is as unknown as one never stored; ``item_cubes`` is the one lookup by id."""
    store = two_cubes
    mine, theirs = add(store, (item("mine"), unit(0)), (item("theirs", cube="c2"), unit(1)))
    assert store.item_cubes([theirs, mine, "missing"]) == {mine: "c1", theirs: "c2"}
    assert store.item_cubes([]) == {}
    assert [i.id for i in store.get_items([theirs, mine], ["c1"])] == [mine]
    assert [i.id for i in store.get_items([theirs, mine], ["c2", "c1"])] == [theirs, mine]
    assert store.get_items([mine], []) == []
    assert store.get_vectors([mine], ["c1"]).shape == (1, 8)
    with pytest.raises(ItemNotFound):
        store.get_vectors([theirs], ["c1"])
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    store.record_access("c1", {mine: 2, theirs: 5}, at)
    counted = store.get_items([mine, theirs], ["c1", "c2"])
    assert [i.access_count for i in counted] == [2, 0]
    assert store.versions("c2", mine) == [] and len(store.versions("c1", mine)) == 1
    assert store.erase_items([theirs], ["c1"], "u1", None) == 0
    assert store.get_items([theirs], ["c2"])[0].text == "theirs"
    assert store.erase_items([theirs, mine], ["c1", "c2"], "u1", None) == 2
