"""The engines the store suites run against: SQLite (always) and PostgreSQL (when a test server
is available, see ``tests/services.py``).

A ``Backend`` opens stores on one database (``open()`` again is another connection, as another
process would have), opens a second, separate database (``other()``) and runs raw SQL the way an
operator would (``raw()``), with the error its driver raises for a refused statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstrata.store.base import Store
from memstrata.store.sqlite import SQLiteStore
from tests.services import fresh_database

ENGINES = ["sqlite", "postgres"]


@dataclass
class Backend:
    name: str
    open: Callable[[], Store]
    other: Callable[[], Store]
    raw: Callable[[], AbstractContextManager[Any]]
    refused: type[Exception]


@contextmanager
def open_backend(name: str, tmp_path: Path) -> Iterator[Backend]:
    """A fresh database of engine ``name``; stores opened through it are closed at the end."""
    with ExitStack() as stack:
        opened: list[Store] = []

        def track(store: Store) -> Store:
            opened.append(store)
            return store

        if name == "sqlite":
            path, second = tmp_path / "store.db", tmp_path / "other.db"

            @contextmanager
            def sqlite_raw() -> Iterator[Any]:
                conn = sqlite3.connect(path, isolation_level=None)
                try:
                    yield conn
                finally:
                    conn.close()

            found = Backend(
                name,
                lambda: track(SQLiteStore(path)),
                lambda: track(SQLiteStore(second)),
                sqlite_raw,
                sqlite3.IntegrityError,
            )
        else:
            import psycopg

            from memstrata.store.postgres import PostgresStore

            dsn = stack.enter_context(fresh_database())
            other_dsn = stack.enter_context(fresh_database())

            @contextmanager
            def postgres_raw() -> Iterator[Any]:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    yield conn

            found = Backend(
                name,
                lambda: track(PostgresStore(dsn, artifacts_dir=tmp_path / "artifacts")),
                lambda: track(PostgresStore(other_dsn, artifacts_dir=tmp_path / "other")),
                postgres_raw,
                psycopg.Error,
            )
        probe = found.open()
        assert type(probe).__name__ == {"sqlite": "SQLiteStore"}.get(name, "PostgresStore")
        try:
            yield found
        finally:
            for store in reversed(opened):
                store.close()
