"""The scale-out backend: PostgreSQL with pgvector, for many processes on many
machines.

``PostgresStore`` is PostgreSQL's database (``connection.py``: a connection pool, the dialect),
its search (``search.py``: BM25 over ``tsvector``, pgvector cosine) and the calls both engines
share (``store/sql/``'s ``SQLStore``).  What is PostgreSQL's own is here: the hooks that keep an
item's full text and embedding as columns of its row (``writes.py``), the vector calls, the
scratch index of a past state (temporary tables of a connection of its own), ``compact``
(``VACUUM FULL``) and where artifact files go (``artifacts_dir``, shared by every server).

A scratch index's temporary tables are named as the live ones (``items``, ``item_seq``), which
PostgreSQL finds first on that connection: the same SQL and search code then rank it as the live
search would have.  They live in the session's local buffers (``temp_buffers``, raised to
``SCRATCH_BUFFERS``), are never logged, and are dropped with the connection; a past state larger
than the buffers spills to the server's temporary files, which go with it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from memstrata.errors import ItemNotFound, MemCubeError
from memstrata.model import MemoryItem
from memstrata.store.base import Vectors
from memstrata.store.postgres import writes
from memstrata.store.postgres.connection import DIALECT
from memstrata.store.postgres.search import PostgresSearch
from memstrata.store.postings import PostingsCache
from memstrata.store.sql import writes as shared
from memstrata.store.sql.database import Layout
from memstrata.store.sql.store import SQLStore

#: Local buffers of a scratch connection (PostgreSQL's default is 8 MB).
SCRATCH_BUFFERS = "256MB"
#: A write of at least this many items (an import, a migration, a large add) has the items
#: table analyzed at once (see ``PostgresStore._added``).
ANALYZE_AFTER = 1000
# The tables whose rows hold what was said (a vector and full text are columns of ``items``).
_CONTENT_TABLES = ("items", "item_versions", "events", "tasks")
_SIZE = "SELECT sum(pg_total_relation_size(t::regclass))::bigint FROM unnest(%s::text[]) AS t"


class PostgresStore(PostgresSearch, SQLStore):
    """``Store`` over one PostgreSQL database (``postgresql://…``).  Thread-safe; any number of
    processes may share it.

    ``PostgresStore(dsn, pool_size=…, keyword_max_postings=…, artifacts_dir=…)``.
    """

    layout: ClassVar[Layout] = writes
    HAS_VECTOR = "i.vector IS NOT NULL"

    def __init__(self, dsn: str, *, artifacts_dir: str | Path | None = None, **options: Any):
        super().__init__(dsn, **options)
        self.artifacts_dir = None if artifacts_dir is None else Path(artifacts_dir)

    # -- the engine's rows (``SQLDatabase`` hooks) --------------------------------------------

    def _added(self, cube_id: str, count: int) -> None:
        del cube_id  # BM25's statistics are not per cube
        self._indexed += count
        if count >= ANALYZE_AFTER:
            # Until the planner's statistics count a bulk load's rows it may take a cube for a
            # few rows and scan it instead of walking the HNSW index: after `memstrata migrate`
            # of 12,826 items, 51 ms a dense query against 2.4 ms once analyzed (bench/core.py
            # at 10k, docs/benchmarks.md).  Autovacuum would analyze, but only on its round.
            # ANALYZE takes no lock that searches or writes wait for.
            with self.transaction() as conn:
                conn.execute("ANALYZE items")

    def artifact_dir(self, cube_id: str) -> Path:
        if self.artifacts_dir is None:
            raise MemCubeError(
                f"the store at {self.where} has no artifacts directory",
                hint="set MEMSTRATA_ARTIFACTS_DIR to a directory every server can reach",
            )
        return self.artifacts_dir / cube_id

    def _artifact_base(self) -> Path:
        """What stored artifact paths are relative to: the parent of ``artifacts_dir`` (a row
        path is ``<artifacts_dir name>/<cube_id>/<file>``, as SQLite's is relative to the
        database file's directory)."""
        return Path.cwd() if self.artifacts_dir is None else self.artifacts_dir.parent

    # -- vectors -----------------------------------------------------------------------------

    def get_vectors(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> Vectors:
        sql = (
            "SELECT id, vector::real[] FROM items WHERE cube_id = ANY(%s) AND id = ANY(%s) "
            "AND vector IS NOT NULL"
        )
        cubes = list(dict.fromkeys(cube_ids))
        found = {r[0]: r[1] for r in self.rows(sql, (cubes, list(item_ids)))}
        missing = [i for i in item_ids if i not in found]
        if missing:
            raise ItemNotFound(missing[0])
        if not item_ids:
            return np.zeros((0, 0), np.float32)
        return np.asarray([found[i] for i in item_ids], dtype=np.float32)

    def replace_vectors(
        self, cube_id: str, item_ids: Sequence[str], vectors: Vectors, embedder: str
    ) -> None:
        with self.transaction() as conn:
            widths = {int(np.asarray(v).shape[0]) for v in vectors}
            for item_id, vector in zip(item_ids, vectors, strict=True):
                done = conn.execute(
                    "UPDATE items SET vector = %s::real[]::vector, dim = %s, embedder = %s, "
                    "seq = nextval('item_seq') WHERE id = %s AND cube_id = %s",
                    (writes.vector_param(vector), int(np.asarray(vector).shape[0]), embedder,
                     item_id, cube_id),
                ).rowcount  # fmt: skip
                if not done:
                    raise ItemNotFound(item_id, cube_id)
            for dim in widths:
                writes.ensure_index(conn, dim)
            conn.execute("UPDATE cubes SET embedder = %s WHERE cube_id = %s", (embedder, cube_id))
            shared.event(DIALECT, conn, None, cube_id, None, "reembed",
                         after={"embedder": embedder})  # fmt: skip

    # -- the past ----------------------------------------------------------------------------

    @contextmanager
    def scratch_index(
        self, items: Sequence[MemoryItem], vectors: Vectors
    ) -> Iterator[PostgresStore]:
        """A ``SearchIndex`` over exactly ``items`` (row i of ``vectors`` is item i's vector; a
        row of zeros: none), gone when the context exits (see the module doc)."""
        conn = self._connect()
        try:
            with DIALECT.mapped("a scratch index on", self.where):
                home = conn.execute("SELECT current_schema()").fetchone()[0]
                conn.execute(f"SET temp_buffers = '{SCRATCH_BUFFERS}'")
                conn.execute(
                    f'CREATE TEMP TABLE items (LIKE "{home}".items INCLUDING DEFAULTS '
                    "INCLUDING CONSTRAINTS)"
                )
                conn.execute("CREATE TEMP SEQUENCE item_seq")
            scratch = _Scratch(self, conn)
            given = [row if row.any() else None for row in vectors]
            with scratch.transaction() as tx:
                writes.insert_items(tx, items, given, "scratch", index=False)
            yield scratch
        finally:
            conn.close()

    # -- files -------------------------------------------------------------------------------

    def compact(self, actor: str) -> dict[str, int]:
        """``VACUUM FULL`` the tables that hold content (old row versions of erased items
        leave the table files), then record a ``vacuum`` event.  ``VACUUM FULL`` locks each
        table while it is rewritten: other calls wait for it.  PostgreSQL keeps an erased
        row's old versions until then (or a routine ``VACUUM`` and time); docs/deploy.md says
        so."""
        tables = list(_CONTENT_TABLES)
        # autocommit: VACUUM runs outside a transaction
        with self._connect() as conn, DIALECT.mapped("vacuum of", self.where):
            before = int(conn.execute(_SIZE, (tables,)).fetchone()[0])
            conn.execute(f"VACUUM FULL {', '.join(tables)}")
            after = int(conn.execute(_SIZE, (tables,)).fetchone()[0])
        sizes = {"bytes_before": before, "bytes_after": after}
        with self.transaction() as conn:
            shared.event(DIALECT, conn, actor, None, None, "vacuum", after=sizes)
        return sizes


class _Scratch(PostgresStore):
    """A store on one connection whose temporary tables hold a past state (searched only)."""

    def __init__(self, live: PostgresStore, conn: Any) -> None:  # no pool, no migration
        self.dsn, self.where = live.dsn, f"{live.where} (scratch)"
        self.artifacts_dir = None
        self._max_postings = live._max_postings
        self._postings = PostingsCache()
        self._stats = None
        self._indexed = 0
        self._local = threading.local()
        self._timeout = live._timeout
        self._pool = None
        self._conn = conn
        self._lock = threading.Lock()

    @contextmanager
    def _acquire(self) -> Iterator[Any]:
        with self._lock:
            yield self._conn
