"""``HistoryStore``: versions, events, a cube as it stood at a past time, and search over it.

As in SQLite (``memstrata/store/sqlite/history.py``): the state of a cube at time T is, per item,
its latest snapshot written at or before T.  ``scratch_index`` copies such a state into
temporary tables of a connection of its own, named as the live ones (``items``, ``item_seq``),
which PostgreSQL finds first on that connection: the same SQL and the same ``PostgresSearch``
code then rank it as the live search would have.  Temporary tables live in the session's local
buffers (``temp_buffers``, raised to ``SCRATCH_BUFFERS``), are never logged, and are dropped
with the connection; a past state larger than the buffers spills to the server's temporary
files, which go with it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from memstrata.model import Event, MemoryItem, Version
from memstrata.store import rows
from memstrata.store.base import Vectors
from memstrata.store.postgres import writes
from memstrata.store.postgres.connection import PostgresDatabase
from memstrata.store.postgres.search import PostgresSearch
from memstrata.store.postings import PostingsCache

# Times are stored as float seconds and shown as datetimes (whole microseconds): a time given back
# as shown may differ from the stored one by half a microsecond either way.
_TIME_SLACK = 5e-7
#: Local buffers of a scratch connection (PostgreSQL's default is 8 MB).
SCRATCH_BUFFERS = "256MB"


class PostgresHistory(PostgresDatabase):
    """``HistoryStore`` over ``item_versions`` and ``events``."""

    def versions(self, item_id: str) -> list[Version]:
        sql = (
            "SELECT version, snapshot, at, actor, reason FROM item_versions "
            "WHERE item_id = %s ORDER BY version"
        )
        return [
            Version(r[0], rows.item_from_dict(json.loads(r[1])), rows.to_datetime(r[2]), r[3], r[4])
            for r in self.rows(sql, (item_id,))
        ]

    def events(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        clauses: list[str] = ["TRUE"]
        params: list[Any] = []
        if since is not None:
            clauses.append("at >= %s")
            params.append(since.timestamp() - _TIME_SLACK)
        if cube_id is not None:
            clauses.append("cube_id = %s")
            params.append(cube_id)
        if item_id is not None:
            clauses.append("item_id = %s")
            params.append(item_id)
        where = " AND ".join(clauses)
        sql = f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE {where} ORDER BY seq LIMIT %s"
        return [rows.event_from_row(r) for r in self.rows(sql, [*params, limit])]

    def items_as_of(self, cube_id: str, at: datetime) -> list[MemoryItem]:
        sql = (
            "SELECT v.snapshot FROM item_versions v JOIN items i ON i.id = v.item_id "
            "WHERE i.cube_id = %s AND v.version = (SELECT max(w.version) FROM item_versions w "
            "WHERE w.item_id = v.item_id AND w.at <= %s) ORDER BY i.event_time, i.id"
        )
        found = self.rows(sql, (cube_id, at.timestamp() + _TIME_SLACK))
        return [rows.item_from_dict(json.loads(r[0])) for r in found]

    @contextmanager
    def scratch_index(
        self, items: Sequence[MemoryItem], vectors: Vectors
    ) -> Iterator[PostgresSearch]:
        """A ``SearchIndex`` over exactly ``items`` (row i of ``vectors`` is item i's vector; a
        row of zeros: none), gone when the context exits (see the module doc)."""
        conn = self._connect()
        try:
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


class _Scratch(PostgresSearch):
    """``PostgresSearch`` on one connection whose temporary tables hold a past state."""

    def __init__(self, live: PostgresDatabase, conn: Any) -> None:  # no pool, no migration
        self.dsn, self.where = live.dsn, f"{live.where} (scratch)"
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
