"""``HistoryStore`` for both engines: versions, events and a cube as it stood at a past time.

Every write but the refresh of a derived segment (``update_item(..., snapshot=False)``, see
docs/lifecycle.md) keeps a full snapshot in ``item_versions`` with its time, so the state of a
cube at time T is, per item, its latest snapshot written at or before T.  ``scratch_index`` (a
search index over such a state, ranked by the same engine as the live store) is the engine's.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memstrata.model import Event, MemoryItem, Version
from memstrata.store import rows
from memstrata.store.sql.database import SQLDatabase

# Times are stored as float seconds and shown as datetimes (whole microseconds): a time given back
# as shown may differ from the stored one by half a microsecond either way.
_TIME_SLACK = 5e-7


class SQLHistory(SQLDatabase):
    """``HistoryStore``'s reads over ``item_versions`` and ``events``."""

    def versions(self, cube_id: str, item_id: str) -> list[Version]:
        m = self.dialect.mark
        sql = (
            "SELECT version, snapshot, at, actor, reason FROM item_versions "
            f"WHERE cube_id = {m} AND item_id = {m} ORDER BY version"
        )
        return [
            Version(r[0], rows.item_from_dict(json.loads(r[1])), rows.to_datetime(r[2]), r[3], r[4])
            for r in self.rows(sql, (cube_id, item_id))
        ]

    def events(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        m = self.dialect.mark
        clauses: list[str] = ["1 = 1"]
        params: list[Any] = []
        for condition, value in (
            (f"at >= {m}", None if since is None else since.timestamp() - _TIME_SLACK),
            (f"cube_id = {m}", cube_id),
            (f"item_id = {m}", item_id),
        ):
            if value is not None:
                clauses.append(condition)
                params.append(value)
        where = " AND ".join(clauses)
        sql = f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE {where} ORDER BY seq LIMIT {m}"
        return [rows.event_from_row(r) for r in self.rows(sql, [*params, limit])]

    def items_as_of(self, cube_id: str, at: datetime) -> list[MemoryItem]:
        m = self.dialect.mark
        sql = (
            "SELECT v.snapshot FROM item_versions v "
            "JOIN items i ON i.cube_id = v.cube_id AND i.id = v.item_id "
            f"WHERE v.cube_id = {m} AND v.version = (SELECT max(w.version) FROM item_versions w "
            f"WHERE w.cube_id = v.cube_id AND w.item_id = v.item_id AND w.at <= {m}) "
            "ORDER BY i.event_time, i.id"
        )
        found = self.rows(sql, (cube_id, at.timestamp() + _TIME_SLACK))
        return [rows.item_from_dict(json.loads(r[0])) for r in found]
