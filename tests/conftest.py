"""Shared fixtures: a real database per test and the real default embedder (e5).

The database is an SQLite file, or, in a module marked ``@pytest.mark.engines("sqlite",
"postgres")``, each engine in turn (a fresh PostgreSQL database from the test server; see
``tests/services.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import MemoryOS
from tests.services import fresh_database

STORES = {"sqlite": "SQLiteStore", "postgres": "PostgresStore"}
TABLES = ("users", "cubes", "grants", "items", "item_versions", "vectors", "events", "items_fts")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run tests that use ``engine`` once per engine their module's ``engines`` mark names."""
    if "engine" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker("engines")
        metafunc.parametrize("engine", marked.args if marked else ("sqlite",), scope="function")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def database(engine: str, db_path: Path) -> Iterator[str]:
    """The address of a new database of ``engine``: an SQLite file, or a PostgreSQL DSN."""
    if engine == "sqlite":
        yield str(db_path)
    else:
        with fresh_database() as dsn:
            yield dsn


@pytest.fixture
def mos(engine: str, database: str) -> Iterator[MemoryOS]:
    """A MemoryOS running background tasks inline (``workers=0``), so tests are deterministic."""
    with MemoryOS.open(database, workers=0) as m:
        assert type(m.store).__name__ == STORES[engine]
        yield m


@pytest.fixture
def alice_cube(mos: MemoryOS) -> str:
    """User ``alice`` owning cube ``notes``; user ``bob`` with no grant."""
    mos.create_user("alice", name="Alice")
    mos.create_user("bob")
    return mos.create_cube("notes", owner="alice", cube_id="notes").cube_id


def row_counts(database: str | Path) -> dict[str, int]:
    """Rows per table, read through a separate connection: proof that nothing was written.

    ``database`` is an SQLite file or a PostgreSQL DSN (whose vectors and full text are columns
    of ``items``)."""
    if str(database).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(database)) as pg:
            count = lambda t: pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # noqa: E731
            return {t: count(t) for t in TABLES if t not in ("vectors", "items_fts")}
    conn = sqlite3.connect(database)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()
