"""``HistoryStore``: versions, events, a cube as it stood at a past time, and search over it.

Every write but the refresh of a derived segment (``update_item(..., snapshot=False)``, see
docs/lifecycle.md) keeps a full snapshot in ``item_versions`` with its time, so the state of a
cube at time T is, per item, its latest snapshot written at or before T.  ``scratch_index`` copies such
a state into a private in-memory database laid out exactly as this one (same schema, same
full-text tokenizer, same row writers) and searched by the same ``SQLiteSearch`` code, so a
search of the past ranks as the live search would have.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from memstrata.model import Event, MemoryItem, Version
from memstrata.store import rows
from memstrata.store.base import Vectors
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import SQLiteDatabase, memory_uri
from memstrata.store.sqlite.search import SQLiteSearch

# Times are stored as float seconds and shown as datetimes (whole microseconds): a time given back
# as shown may differ from the stored one by half a microsecond either way.
_TIME_SLACK = 5e-7


class SQLiteHistory(SQLiteDatabase):
    """``HistoryStore`` over ``item_versions`` and ``events``."""

    def versions(self, item_id: str) -> list[Version]:
        sql = (
            "SELECT version, snapshot, at, actor, reason FROM item_versions "
            "WHERE item_id = ? ORDER BY version"
        )
        return [
            Version(r[0], rows.item_from_dict(json.loads(r[1])), rows.to_datetime(r[2]), r[3], r[4])
            for r in self.reader().execute(sql, (item_id,))
        ]

    def events(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        clauses: list[str] = ["1"]
        params: list[Any] = []
        if since is not None:
            clauses.append("at >= ?")
            params.append(since.timestamp() - _TIME_SLACK)
        if cube_id is not None:
            clauses.append("cube_id = ?")
            params.append(cube_id)
        if item_id is not None:
            clauses.append("item_id = ?")
            params.append(item_id)
        where = " AND ".join(clauses)
        sql = f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE {where} ORDER BY seq LIMIT ?"
        return [rows.event_from_row(r) for r in self.reader().execute(sql, [*params, limit])]

    def items_as_of(self, cube_id: str, at: datetime) -> list[MemoryItem]:
        sql = (
            "SELECT v.snapshot FROM item_versions v JOIN items i ON i.id = v.item_id "
            "WHERE i.cube_id = ? AND v.version = (SELECT max(w.version) FROM item_versions w "
            "WHERE w.item_id = v.item_id AND w.at <= ?) ORDER BY i.event_time, i.id"
        )
        cursor = self.reader().execute(sql, (cube_id, at.timestamp() + _TIME_SLACK))
        return [rows.item_from_dict(json.loads(r[0])) for r in cursor]

    @contextmanager
    def scratch_index(
        self, items: Sequence[MemoryItem], vectors: Vectors
    ) -> Iterator[SQLiteSearch]:
        """A ``SearchIndex`` over exactly ``items`` (row i of ``vectors`` is item i's vector; a
        row of zeros: the item has no vector), gone when the context exits.

        It lives in this process's memory only: nothing of it reaches a disk.  Keyword term
        choice uses this store's ``keyword_max_postings``.
        """
        scratch = SQLiteSearch(
            memory_uri(), keyword_max_postings=self._max_postings, foreign_keys=False
        )
        try:
            # A real vector has unit norm; zeros stand for none (left out of the dense channel).
            given = [row if row.any() else None for row in vectors]
            with scratch.transaction() as conn:
                # Cube prefixes and ids are the items' own, so the copy's cubes are searched
                # with the same terms as the live ones.
                writes.insert_items(conn, items, given, "scratch")
            yield scratch
        finally:
            scratch.close()
