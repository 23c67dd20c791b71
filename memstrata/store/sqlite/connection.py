"""The connections of one SQLite database: what every part of ``SQLiteStore`` stands on.

Concurrency, datasette-style: one writer connection used under a lock with ``BEGIN IMMEDIATE``
(so a write never starts a transaction it cannot finish), and one read connection per thread.
Other processes may open the same file; ``busy_timeout`` makes their writers queue, and vector
mirrors see their changes through the change sequence (see ``vectors.py``).  ``synchronous=FULL``
makes a commit durable before a write method returns.

``path`` is a file name, or a ``file:…?mode=memory&cache=shared`` URI (see ``memory_uri``) for a
database that lives in this process's memory only and goes with its last connection.

``SQLiteDialect`` is the engine's words for the shared SQL layer (``store/sql/``): ``?`` marks, a
list of ids as one JSON parameter, no row locks (one writer), index hints, and which driver
errors mean "locked".  Every read, write and snapshot maps driver errors through it, so none
leaves the store as ``sqlite3`` error; a file another connection holds locked is a
``StorageError`` saying so, never ``NotOurDatabase``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memstrata.errors import NotOurDatabase, SchemaTooNew, StorageError
from memstrata.store.postings import PostingsCache
from memstrata.store.sql.database import SQLDatabase
from memstrata.store.sql.dialect import Dialect
from memstrata.store.sqlite import schema
from memstrata.store.sqlite.vectors import VectorCache

# A server has a reader per request thread, up to 40 (anyio's pool), so what each caches is
# multiplied by 40; under a soak (bench/soak.py) the readers' caches filled for minutes and the
# server's RSS rose with them.  The writer, one connection, keeps the defaults.
#: Prepared statements each reader keeps (Python's default is 128).  A statement of the store
#: costs about 27 KiB of SQLite's memory, and ``WHERE id IN (?, ?, …)`` is a new statement for
#: every length of its list (about 130 distinct ones in searches and contexts): at 128 a reader
#: grew to about 3.5 MiB, 40 readers to 140 MiB; at 32 (measured: 3.1 MiB instead of 5.7 for
#: 200 searches and contexts) the ones used over and over stay cached and one-off lengths are
#: prepared again, some microseconds each.
READER_CACHED_STATEMENTS = 32
#: Page cache of each reader, KiB (SQLite's default is 2,000: 80 MiB for 40 readers as the file
#: grows).  A page not cached is copied again from the OS's file cache, in microseconds.  At 512
#: the readers' SQLite memory still rose 15 → 18-27 MiB over a 300 s soak, caches filling as
#: the file grew (statements steady); 128 (32 pages) bounds the 42 readers' pages to 5 MiB.
READER_CACHE_KIB = 128


#: SQLite's result codes (the low byte of an extended code) that mean another connection holds
#: the lock asked for: SQLITE_BUSY and SQLITE_LOCKED.
_LOCKED_CODES = (5, 6)


class SQLiteDialect(Dialect):
    """SQLite's words for the shared statements (see ``Dialect``)."""

    name = "sqlite"
    mark = "?"
    for_update = ""  # one writer: a write transaction already excludes every other
    no_limit = -1
    position = "instr"
    driver_error = sqlite3.Error

    def among(self, column: str, values: Sequence[str]) -> tuple[str, Any]:
        # ``IN (?, ?, …)`` would be a new statement for every length of the list, each prepared
        # and cached (about 27 KiB) by every thread's reader: one JSON parameter instead.
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(list(values))

    def json_equals(self, column: str, key: str, value: Any) -> tuple[str, list[Any]]:
        # ``json_extract`` reads ``true`` as 1, so the JSON type is compared too (a boolean only
        # equals a boolean, a number a number, a string a string).
        path = f'$."{key}"'
        if value is None:
            return f"json_extract({column}, ?) IS NULL", [path]
        if isinstance(value, bool):
            kinds = "'true'" if value else "'false'"
        elif isinstance(value, int | float):
            kinds = "'integer', 'real'"
        else:
            kinds = "'text'"
        clause = f"(json_type({column}, ?) IN ({kinds}) AND json_extract({column}, ?) IS ?)"
        return clause, [path, path, value]

    def indexed_by(self, index: str) -> str:
        return f" INDEXED BY {index}"

    def dicts(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(conn.execute(sql, params).fetchall())  # sqlite3.Row: by name and position

    def executemany(self, conn: Any, sql: str, params: Sequence[Sequence[Any]]) -> None:
        if params:
            conn.executemany(sql, params)

    def is_locked(self, exc: BaseException) -> bool:
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return bool(code & 0xFF in _LOCKED_CODES)
        return "locked" in str(exc) or "busy" in str(exc)


DIALECT = SQLiteDialect()


def memory_uri() -> str:
    """A fresh URI naming a private in-memory database (shared by the connections that open it).

    Nothing written to it reaches a disk: no file, no journal, and temporary tables and sorts
    kept in memory too (see ``SQLiteDatabase``).
    """
    return f"file:memstrata-scratch-{uuid.uuid4().hex}?mode=memory&cache=shared"


class SQLiteDatabase(SQLDatabase):
    """One SQLite database: its writer, per-thread readers, file settings and search caches.

    Thread-safe; safe to share a file between processes.  ``SQLiteStore`` is this class, its
    search, and the shared ``SQLStore``, so every call shares one set of connections.
    """

    dialect = DIALECT

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = 10000,
        synchronous: str = "FULL",
        keyword_max_postings: int = 5000,
        foreign_keys: bool = True,
        vector_index_min_items: int = 0,
        vector_index_threads: int = 1,
    ) -> None:
        """Open (creating and migrating if needed) the database at ``path``.

        ``foreign_keys=False`` only for a scratch copy holding items without their cubes' rows.
        ``vector_index_min_items`` > 0: cubes of that many items get an approximate dense index
        (built by ``build_vector_index``, kept in ``<path>.vindex/``; see ``vectors.py``).
        Raises ``NotOurDatabase``, ``SchemaTooNew`` or ``StorageError``.
        """
        self.path = str(path)
        self.where = self.path
        self._foreign_keys = foreign_keys
        self._in_memory = self.path == ":memory:" or (
            self.path.startswith("file:") and "mode=memory" in self.path
        )
        self._max_postings = keyword_max_postings
        self._postings = PostingsCache()
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._lock = threading.RLock()
        self._depth = 0
        self._writing_thread: int | None = None
        self._local = threading.local()
        # Each thread's reader, by thread: a server's request threads come and go, and the
        # reader of a thread that has ended is closed when the next one is opened.
        self._readers: dict[threading.Thread, sqlite3.Connection] = {}
        self._readers_lock = threading.Lock()
        folder = None if self._in_memory else Path(f"{self.path}.vindex")
        self._vectors = VectorCache(
            folder, index_min_items=vector_index_min_items, threads=vector_index_threads
        )
        #: rows added per cube by this process since ``vector_index_due`` last looked
        self._added_since: Counter[str] = Counter()
        if not self._in_memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = self._connect()
        self._prepare()

    # -- connections -------------------------------------------------------------------------

    def _connect(self, *, reader: bool = False) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
                uri=self.path.startswith("file:"),
                cached_statements=READER_CACHED_STATEMENTS if reader else 128,
            )
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        if reader and not self._in_memory:  # a shared in-memory database's cache is its data
            conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
        if self._in_memory:
            # Sorts and temporary indexes would otherwise spill to temporary files.
            conn.execute("PRAGMA temp_store = MEMORY")
        return conn

    def _prepare(self) -> None:
        """Check the file is ours (or empty), switch on WAL, and migrate it forward."""
        conn = self._writer
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            n_tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            conn.close()
            if DIALECT.is_locked(exc):  # ours or not, it cannot be read now: say so
                raise DIALECT.storage_error("opening", self.path, exc) from exc
            raise NotOurDatabase(self.path, f"not an SQLite database: {exc}") from exc
        if app_id != schema.APPLICATION_ID and n_tables:
            conn.close()
            raise NotOurDatabase(self.path, "it holds another application's tables")
        try:
            with DIALECT.mapped("opening", self.path):
                self._settle(conn)
        except BaseException:
            conn.close()
            raise

    def _settle(self, conn: sqlite3.Connection) -> None:
        """The connection's settings, then the schema checked and migrated forward."""
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute(f"PRAGMA foreign_keys = {'ON' if self._foreign_keys else 'OFF'}")
        # Freed pages are zeroed, so erased content does not linger in the file's free list.
        conn.execute("PRAGMA secure_delete = ON")
        found = schema.current_version(conn)
        if found > schema.LATEST:
            raise SchemaTooNew(self.path, found, schema.LATEST)
        if found < schema.LATEST:
            with self.transaction() as tx:
                tx.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
                schema.migrate(tx)

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection (the writer's, inside a write transaction)."""
        if self._writing_thread == threading.get_ident():
            return self._writer
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(reader=True)
            self._local.conn = conn
            with self._readers_lock:
                ended = [t for t in self._readers if not t.is_alive()]
                for thread in ended:
                    self._readers.pop(thread).close()
                self._readers[threading.current_thread()] = conn
        return conn

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """This thread's read connection (see ``reader``); driver errors become ``StorageError``."""
        with DIALECT.mapped("reading", self.path):
            yield self.reader()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (nested uses join the outer one); commits before returning."""
        with self._lock:
            conn = self._writer
            if self._depth:
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            self._depth = 1
            self._writing_thread = threading.get_ident()
            try:
                with DIALECT.mapped("write to", self.path):
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        yield conn
                    except BaseException:
                        # After SQLITE_FULL, IOERR or NOMEM SQLite has rolled back already.
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                    conn.execute("COMMIT")
            finally:
                self._depth = 0
                self._writing_thread = None

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """This thread's read connection inside one read transaction: one consistent view of
        the database however many queries are made, while others write."""
        conn = self.reader()
        if conn.in_transaction:  # the writer, inside a write transaction: already consistent
            yield conn
            return
        with DIALECT.mapped("reading", self.path):
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("ROLLBACK")

    def close(self) -> None:
        """Close every connection (the readers of all threads too); the store is unusable after.

        A write transaction in progress in another thread (a background task that ``close`` of
        the scheduler gave up on) is let finish first; that thread's next call then fails with
        ``StorageError`` ("closed database").
        """
        with self._lock, self._readers_lock:
            for conn in [*self._readers.values(), self._writer]:
                conn.close()
            self._readers.clear()

    def _forget(self, cube_ids: Iterable[str]) -> None:
        """Drop what the caches know of these cubes (after a write that removed content), and
        their approximate indexes, which may hold vectors of what was removed."""
        for cube_id in cube_ids:
            self._vectors.forget(cube_id, drop_index=True)
        self._postings.clear()
