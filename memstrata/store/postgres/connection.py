"""The connections of one PostgreSQL database: what every part of ``PostgresStore`` stands on.

A pool of connections (psycopg 3, ``psycopg_pool``) in autocommit mode: a read is one statement
on any pooled connection; a write is one explicit transaction (``transaction()``), committed
before the method returns, so an acknowledged write is durable.  Writers run concurrently and
rely on PostgreSQL's row locks (an update reads its row ``FOR UPDATE``); a thread already inside
a transaction reuses its connection, so nested writes join the outer transaction and reads see
its rows.  Any number of processes may share the database; nothing is cached that another
process could make stale except term posting counts and BM25's collection statistics, which are
kept a minute (they only weigh query terms).

Errors leave as ``memstrata.errors`` types (``PostgresDialect``, the engine's words for the
shared SQL layer ``store/sql/``, maps them): an unreachable server, a missing ``vector``
extension or a schema newer than this code is one ``StorageError`` line at open.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memstrata.errors import ConfigurationError, SchemaTooNew, StorageError
from memstrata.store.postgres import schema
from memstrata.store.postings import POSTINGS_TTL_S, PostingsCache
from memstrata.store.sql.database import SQLDatabase
from memstrata.store.sql.dialect import Dialect

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool
except ImportError as missing:  # pragma: no cover - depends on the extra
    raise ConfigurationError(
        f"the PostgreSQL store needs psycopg: {missing}",
        hint="pip install 'memstrata[postgres]'",
    ) from missing

#: Connections in the pool (a server's request threads wait for one when all are busy).
POOL_SIZE = 16
#: Seconds to wait for a pooled connection, or for the server at open.
CONNECT_TIMEOUT_S = 10.0
# HNSW searches with a filter keep scanning the graph until enough rows pass it, in exact order
# (pgvector ≥ 0.8).  ef_search is the candidate list: on 20k e5 vectors of bench/core.py's
# conversations (bench/scale.py --e5) recall@10 against the exact scan was 0.960 at 100 (5.4 ms)
# and 0.985 at 200 (8.8 ms); at 100k, 0.905 at 200 (11.0 ms): below the 0.98 target, still open.
SESSION_SETTINGS = (
    "SET hnsw.iterative_scan = strict_order",
    "SET hnsw.ef_search = 200",
)


#: SQLSTATEs of a refusal for want of a lock: lock_not_available, deadlock_detected.
_LOCKED_STATES = ("55P03", "40P01")


class PostgresDialect(Dialect):
    """PostgreSQL's words for the shared statements (see ``Dialect``)."""

    name = "postgresql"
    mark = "%s"
    for_update = " FOR UPDATE"  # writers run concurrently: an update locks the row it read
    no_limit = None
    position = "strpos"
    driver_error = psycopg.Error

    def among(self, column: str, values: Sequence[str]) -> tuple[str, Any]:
        return f"{column} = ANY(%s)", list(values)

    def json_equals(self, column: str, key: str, value: Any) -> tuple[str, list[Any]]:
        # A missing key is JSON null, as SQLite's ``json_extract(…) IS NULL`` has it.
        if value is None:
            return f"coalesce({column}::jsonb -> %s, 'null'::jsonb) = 'null'::jsonb", [key]
        return f"{column}::jsonb -> %s = %s::jsonb", [key, json.dumps(value)]

    def order(self, descending: bool) -> str:
        # SQLite puts NULLs first in ascending order: the same here.
        return "DESC NULLS LAST" if descending else "ASC NULLS FIRST"

    def dicts(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(conn.cursor(row_factory=dict_row).execute(sql, params).fetchall())

    def lock(self, conn: Any, key: str, space: int) -> None:
        conn.execute(f"SELECT pg_advisory_xact_lock(hashtextextended(%s, {int(space)}))", (key,))

    def is_locked(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) in _LOCKED_STATES


DIALECT = PostgresDialect()


def describe(dsn: str) -> str:
    """``dsn`` without its password: ``postgresql://user@host:port/dbname``."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(f"not a PostgreSQL address: {exc}") from exc
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname', '')}"


def first_line(exc: BaseException) -> str:
    """The first line of a driver error (psycopg's messages run over several lines)."""
    return DIALECT.first_line(exc)


class PostgresDatabase(SQLDatabase):
    """One PostgreSQL database: its pool, transactions, meta settings and search caches.

    Thread-safe; any number of processes may share the database.  The Protocol parts of
    ``PostgresStore`` is this class, its search, and the shared ``SQLStore``, so every call
    shares one pool.
    """

    dialect = DIALECT

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = POOL_SIZE,
        keyword_max_postings: int = 5000,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        """Connect to ``dsn`` (creating the ``vector`` extension and the schema when missing).

        Raises ``StorageError`` (unreachable server, no pgvector, failed migration) or
        ``SchemaTooNew``.
        """
        self.dsn = dsn
        self.where = describe(dsn)
        self._max_postings = keyword_max_postings
        self._postings = PostingsCache()
        self._stats: tuple[float, float, float] | None = None  # (monotonic time, N, avgdl)
        self._indexed = 0  # items this process indexed since the statistics were read
        self._local = threading.local()
        self._timeout = connect_timeout_s
        self._prepare()
        self._pool: ConnectionPool[Any] | None = ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=connect_timeout_s,
            open=False,
            name=f"memstrata {self.where}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg.Error as exc:
            raise StorageError(
                f"cannot reach PostgreSQL at {self.where}: {first_line(exc)}"
            ) from exc

    # -- connections -------------------------------------------------------------------------

    @staticmethod
    def _configure(conn: Any) -> None:
        for statement in SESSION_SETTINGS:
            conn.execute(statement)

    def _connect(self) -> Any:
        """A new connection outside the pool (autocommit), for set-up and scratch work."""
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=int(self._timeout))
        except psycopg.Error as exc:
            raise StorageError(
                f"cannot reach PostgreSQL at {self.where}: {first_line(exc)}",
                hint="check that the server runs and the address (MEMSTRATA_DB) is right",
            ) from exc
        return conn

    def _prepare(self) -> None:
        """Create the ``vector`` extension if needed and migrate the schema forward."""
        with self._connect() as conn:
            try:
                if not conn.execute(
                    "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
                ).fetchone():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise StorageError(
                    f"PostgreSQL at {self.where} has no pgvector extension: {first_line(exc)}",
                    hint="install pgvector on the server, or CREATE EXTENSION vector as a superuser",
                ) from exc
            try:
                found = schema.current_version(conn)
                if found > schema.LATEST:
                    raise SchemaTooNew(self.where, found, schema.LATEST)
                if found < schema.LATEST:
                    with conn.transaction():
                        schema.migrate(conn)
            except psycopg.Error as exc:
                raise StorageError(f"cannot set up {self.where}: {first_line(exc)}") from exc

    @contextmanager
    def _acquire(self) -> Iterator[Any]:
        """A connection for one use: from the pool (a scratch index has one of its own)."""
        if self._pool is None:
            raise StorageError(f"the store of {self.where} is closed")
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection to read with: this thread's open transaction's, else a pooled one."""
        with self._held_or_new("reading", None) as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction (nested uses join the outer one); committed before returning."""
        with self._held_or_new("write to", "") as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """A connection inside one read-only repeatable-read transaction: one consistent view
        however many queries are made, while others write."""
        with self._held_or_new("reading", "ISOLATION LEVEL REPEATABLE READ READ ONLY") as conn:
            yield conn

    @contextmanager
    def _held_or_new(self, doing: str, transaction: str | None) -> Iterator[Any]:
        """This thread's open transaction's connection, else a pooled one: in a transaction
        of its own (``SET TRANSACTION`` + ``transaction``, when not None) that this thread's
        nested calls join, driver errors raised as ``StorageError`` ("<doing> <where> failed")."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        with DIALECT.mapped(doing, self.where), self._acquire() as conn:
            if transaction is None:
                yield conn
                return
            with conn.transaction():
                if transaction:
                    conn.execute(f"SET TRANSACTION {transaction}")
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None

    def close(self) -> None:
        """Close the pool; the store is unusable afterwards."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _forget(self, cube_ids: Iterable[str]) -> None:
        """Drop what the caches know (after a write that removed content)."""
        del cube_ids  # the caches are not per cube
        self._postings.clear()
        self._stats = None

    def collection_stats(self) -> tuple[float, float]:
        """(indexed items, their mean term count) for BM25.

        Counted again after ``POSTINGS_TTL_S`` (other processes' writes), or once this process
        has indexed more than 1 % of the items since (a small store's searches see their own
        writes weighed in; a large one's do not count all items after every add).
        """
        stats = self._stats
        if (
            stats is None
            or time.monotonic() - stats[0] >= POSTINGS_TTL_S
            or self._indexed > stats[1] / 100
        ):
            self._indexed = 0
            found = self.row("SELECT count(*), avg(doclen) FROM items WHERE tsv IS NOT NULL")
            count, mean = (found or (0, None))[:2]
            stats = (time.monotonic(), float(count), float(mean or 0.0))
            self._stats = stats
        return stats[1], stats[2]
