"""``ItemStore`` over the ``items``, ``vectors`` and ``items_fts`` tables.

Every item write takes fresh change sequence numbers (``writes.next_seq``), writes its full-text
row when the indexed words change, keeps a version snapshot (unless told not to) and appends an
event, all in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

import numpy as np

from memstrata.errors import ConflictError, ItemNotFound
from memstrata.filters import Filters
from memstrata.model import SEARCHABLE_STATUSES, MemoryItem, utcnow
from memstrata.store import rows
from memstrata.store.base import Vectors
from memstrata.store.sqlite import clauses, writes
from memstrata.store.sqlite.connection import SQLiteDatabase

#: A list of item ids as one parameter (``ids``): ``IN (?, ?, …)`` would be a new statement for
#: every length of the list, each prepared and cached (about 27 KiB) by every thread's reader.
ID_LIST = "(SELECT value FROM json_each(?))"


def ids(item_ids: Sequence[str]) -> tuple[str]:
    """The parameter of ``ID_LIST``."""
    return (json.dumps(list(item_ids)),)


# Searchable statuses as an SQL list (constants, so safe to inline).
LIVE = ", ".join(f"'{s}'" for s in SEARCHABLE_STATUSES)


class SQLiteItems(SQLiteDatabase):
    """``ItemStore``: memory items with their vectors and full text."""

    def add_items(self, items: Sequence[MemoryItem], vectors: Vectors, embedder: str) -> list[str]:
        with self.transaction() as conn:
            ids: list[str] = []
            fresh: list[tuple[MemoryItem, Any]] = []
            seen: dict[tuple[str, str], tuple[str, str]] = {}
            for item, vector in zip(items, vectors, strict=True):
                existing = _existing(conn, seen, item)
                if existing is not None:
                    ids.append(existing)
                    continue
                if item.external_id is not None:
                    seen[(item.cube_id, item.external_id)] = (item.id, item.text)
                fresh.append((item, vector))
                ids.append(item.id)
            writes.insert_items(conn, [f[0] for f in fresh], [f[1] for f in fresh], embedder)
            for item, _ in fresh:
                _created(conn, item)
        self._added_since.update(item.cube_id for item, _ in fresh)
        return ids

    def update_item(
        self,
        item: MemoryItem,
        vector: Vectors | None,
        *,
        op: str,
        actor: str | None,
        reason: str | None = None,
        snapshot: bool = True,
    ) -> MemoryItem:
        with self.transaction() as conn:
            row = conn.execute("SELECT * FROM items WHERE id = ?", (item.id,)).fetchone()
            if row is None:
                raise ItemNotFound(item.id)
            old = rows.item_from_dict(row)
            if old.version != item.version:
                raise ConflictError(
                    f"item {item.id!r} changed since it was read (version {old.version}, "
                    f"not {item.version})",
                    hint="read it again and retry",
                )
            new = replace(item, version=old.version + 1, updated_at=utcnow())
            _rewrite(conn, row["rid"], old, new, vector)
            if snapshot:
                writes.version(conn, new, actor, reason)
            before, after = rows.changes(old, new)
            writes.event(conn, actor, new.cube_id, new.id, op, before=before, after=after,
                         version=new.version, reason=reason)  # fmt: skip
        return new

    def get_items(self, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids:
            return []
        sql = f"SELECT * FROM items WHERE id IN {ID_LIST}"
        found = {r["id"]: rows.item_from_dict(r) for r in self.reader().execute(sql, ids(item_ids))}
        return [found[i] for i in item_ids if i in found]

    def list_items(
        self,
        cube_id: str,
        filters: Filters,
        *,
        order: Literal["event_time", "heat"] = "event_time",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[MemoryItem]:
        where, params = clauses.filter_sql(filters)
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT i.* FROM items i WHERE i.cube_id = ? AND {where} "
            f"ORDER BY i.{order} {direction}, i.id {direction} LIMIT ? OFFSET ?"
        )
        page = [-1 if limit is None else limit, offset]
        cursor = self.reader().execute(sql, [cube_id, *params, *page])
        return [rows.item_from_dict(r) for r in cursor]

    def count_items(self, cube_id: str, filters: Filters) -> int:
        where, params = clauses.filter_sql(filters)
        sql = f"SELECT count(*) FROM items i WHERE i.cube_id = ? AND {where}"
        return int(self.reader().execute(sql, [cube_id, *params]).fetchone()[0])

    def overflowing_turns(
        self, cube_id: str, capacity: int, idle_s: float | None = None
    ) -> list[MemoryItem]:
        # "last": the session's newest turn; "head": the cube's newest working turn.
        sql = (
            "SELECT * FROM (SELECT i.*, ROW_NUMBER() OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time DESC, i.id DESC) AS newest, "
            "MAX(i.event_time) OVER (PARTITION BY i.session_id) AS last, "
            "MAX(i.event_time) OVER () AS head FROM items i "
            "WHERE i.cube_id = ? AND i.tier = 'working' AND i.type = 'turn' "
            f"AND i.status IN ({LIVE})) WHERE newest > ? OR last < head - ? "
            "ORDER BY event_time, id"
        )
        found = self.reader().execute(sql, (cube_id, capacity, idle_s))
        return [rows.item_from_dict(r) for r in found]

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        if not item_ids:
            return {}
        # One seek per turn on items_cube_session_time: the first live turn of its session
        # after it, in (event_time, id) order.
        sql = (
            "SELECT h.id, (SELECT n.id FROM items n WHERE n.cube_id = h.cube_id "
            "AND n.session_id = h.session_id AND n.event_time >= h.event_time "
            "AND (n.event_time > h.event_time OR n.id > h.id) "
            f"AND n.type = 'turn' AND n.status IN ({LIVE}) ORDER BY n.event_time, n.id LIMIT 1) "
            f"FROM items h WHERE h.id IN {ID_LIST} AND +h.cube_id = ? AND h.type = 'turn' "
            f"AND h.status IN ({LIVE})"
        )
        found = self.reader().execute(sql, [*ids(item_ids), cube_id])
        return {r[0]: r[1] for r in found if r[1] is not None}

    def record_access(self, counts: Mapping[str, int], at: datetime) -> None:
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE items SET access_count = access_count + ?, last_accessed_at = ? "
                "WHERE id = ?",
                [(n, at.timestamp(), item_id) for item_id, n in counts.items()],
            )

    def iter_items(self, cube_id: str) -> Iterator[MemoryItem]:
        cursor = self.reader().execute(
            "SELECT i.* FROM items i JOIN vectors v ON v.rid = i.rid "
            "WHERE i.cube_id = ? ORDER BY i.id",
            (cube_id,),
        )
        while batch := cursor.fetchmany(512):
            yield from (rows.item_from_dict(r) for r in batch)

    def get_vectors(self, item_ids: Sequence[str]) -> Vectors:
        sql = (
            "SELECT i.id, v.vector FROM items i JOIN vectors v ON v.rid = i.rid "
            f"WHERE i.id IN {ID_LIST}"
        )
        found: dict[str, bytes] = dict(self.reader().execute(sql, ids(item_ids)))
        missing = [i for i in item_ids if i not in found]
        if missing:
            raise ItemNotFound(missing[0])
        if not item_ids:
            return np.zeros((0, 0), np.float32)
        return np.stack([np.frombuffer(found[i], dtype=np.float32) for i in item_ids])

    def replace_vectors(
        self, cube_id: str, item_ids: Sequence[str], vectors: Vectors, embedder: str
    ) -> None:
        with self.transaction() as conn:
            last = writes.next_seq(conn, len(item_ids))
            for offset, (item_id, vector) in enumerate(zip(item_ids, vectors, strict=True)):
                rid = conn.execute(
                    "SELECT rid FROM items WHERE id = ? AND cube_id = ?", (item_id, cube_id)
                ).fetchone()
                if rid is None:
                    raise ItemNotFound(item_id, cube_id)
                conn.execute(
                    "UPDATE vectors SET vector = ?, embedder = ? WHERE rid = ?",
                    (np.asarray(vector, np.float32).tobytes(), embedder, rid[0]),
                )
                seq = last - len(item_ids) + 1 + offset
                conn.execute("UPDATE items SET seq = ? WHERE rid = ?", (seq, rid[0]))
            conn.execute("UPDATE cubes SET embedder = ? WHERE cube_id = ?", (embedder, cube_id))
            writes.event(conn, None, cube_id, None, "reembed", after={"embedder": embedder})
        self._vectors.forget(cube_id, drop_index=True)


# -- helpers (all run inside a write transaction) -------------------------------------------


def _created(conn: sqlite3.Connection, item: MemoryItem) -> None:
    """A new item's first version and its ``create`` event."""
    writes.version(conn, item, item.user_id, None)
    after = {"tier": item.tier, "type": item.type, "session_id": item.session_id}
    writes.event(conn, item.user_id, item.cube_id, item.id, "create", after=after, version=1)


def _rewrite(
    conn: sqlite3.Connection, rid: int, old: MemoryItem, new: MemoryItem, vector: Vectors | None
) -> None:
    """Overwrite row ``rid`` with ``new`` (a fresh change sequence number), re-indexing its words
    only when they changed, and its vector when one is given."""
    conn.execute(writes.ITEM_UPDATE, (*rows.item_to_row(new), writes.next_seq(conn, 1), rid))
    if rows.fts_body(new) != rows.fts_body(old):
        conn.execute("DELETE FROM items_fts WHERE rowid = ?", (rid,))
        writes.index(conn, rid, new)
    if vector is not None:
        conn.execute(
            "UPDATE vectors SET vector = ? WHERE rid = ?",
            (np.asarray(vector, np.float32).tobytes(), rid),
        )


def _existing(
    conn: sqlite3.Connection, seen: dict[tuple[str, str], tuple[str, str]], item: MemoryItem
) -> str | None:
    """The id already stored (or earlier in this batch) for the item's external id, if any."""
    if item.external_id is None:
        return None
    key = (item.cube_id, item.external_id)
    hit = seen.get(key)
    if hit is None:
        row = conn.execute(
            "SELECT id, text FROM items WHERE cube_id = ? AND external_id = ?", key
        ).fetchone()
        hit = None if row is None else (row[0], row[1])
    if hit is None:
        return None
    stored_id = hit[0]

    def first() -> str | None:
        row = conn.execute(
            "SELECT snapshot FROM item_versions WHERE item_id = ? AND version = 1", (stored_id,)
        ).fetchone()
        return rows.first_text(None if row is None else row[0])

    return rows.resent(item, stored_id, hit[1], first)
