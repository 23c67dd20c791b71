"""``ItemStore`` over the ``items`` table (its text, full-text vector and embedding in one row).

Every item write takes fresh change sequence numbers, rewrites the full-text vector when the
indexed words change, keeps a version snapshot (unless told not to) and appends an event, all in
one transaction.  An update reads its row ``FOR UPDATE``, so two concurrent writers of one item
are serialised and the second sees the first's version (``ConflictError`` when it was stale).
"""

from __future__ import annotations

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
from memstrata.store.postgres import writes
from memstrata.store.postgres.clauses import filter_sql
from memstrata.store.postgres.connection import PostgresDatabase

#: The item columns, qualified (never ``*``: the row also holds its tsvector and embedding).
SELECT = ", ".join("i." + c for c in rows.ITEM_COLUMNS)
#: Searchable statuses, as the parameter of ``= ANY(%s)``.
LIVE = list(SEARCHABLE_STATUSES)


class PostgresItems(PostgresDatabase):
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
            self._indexed += len(fresh)
            if fresh:
                writes.created(conn, [f[0] for f in fresh])
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
            found = self._item_rows(conn, f"SELECT {SELECT} FROM items i WHERE i.id = %s "
                                    "FOR UPDATE", (item.id,))  # fmt: skip
            if not found:
                raise ItemNotFound(item.id)
            old = rows.item_from_dict(found[0])
            if old.version != item.version:
                raise ConflictError(
                    f"item {item.id!r} changed since it was read (version {old.version}, "
                    f"not {item.version})",
                    hint="read it again and retry",
                )
            new = replace(item, version=old.version + 1, updated_at=utcnow())
            conn.execute(writes.ITEM_UPDATE, (*rows.item_to_row(new), new.id))
            if rows.fts_body(new) != rows.fts_body(old):
                conn.execute(writes.REINDEX, (*writes.body(new), new.id))
            if vector is not None:
                conn.execute(
                    "UPDATE items SET vector = %s::real[]::vector WHERE id = %s",
                    (writes.vector_param(vector), new.id),
                )
            if snapshot:
                writes.version(conn, new, actor, reason)
            before, after = rows.changes(old, new)
            writes.event(conn, actor, new.cube_id, new.id, op, before=before, after=after,
                         version=new.version, reason=reason)  # fmt: skip
        return new

    @staticmethod
    def _item_rows(conn: Any, sql: str, params: Sequence[Any]) -> list[Any]:
        from psycopg.rows import dict_row

        return list(conn.cursor(row_factory=dict_row).execute(sql, params).fetchall())

    def get_items(self, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids:
            return []
        sql = f"SELECT {SELECT} FROM items i WHERE i.id = ANY(%s)"
        found = {r["id"]: rows.item_from_dict(r) for r in self.dict_rows(sql, (list(item_ids),))}
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
        where, params = filter_sql(filters)
        # SQLite puts NULLs first in ascending order: the same here.
        direction = "DESC NULLS LAST" if descending else "ASC NULLS FIRST"
        sql = (
            f"SELECT {SELECT} FROM items i WHERE i.cube_id = %(cube)s AND {where} "
            f"ORDER BY i.{order} {direction}, i.id {direction} LIMIT %(limit)s OFFSET %(offset)s"
        )
        found = self.dict_rows(sql, {"cube": cube_id, "limit": limit, "offset": offset, **params})
        return [rows.item_from_dict(r) for r in found]

    def count_items(self, cube_id: str, filters: Filters) -> int:
        where, params = filter_sql(filters)
        found = self.row(f"SELECT count(*) FROM items i WHERE i.cube_id = %(cube)s AND {where}",
                         {"cube": cube_id, **params})  # fmt: skip
        return int(found[0]) if found else 0

    def overflowing_turns(
        self, cube_id: str, capacity: int, idle_s: float | None = None
    ) -> list[MemoryItem]:
        # "last": the session's newest turn; "head": the cube's newest working turn.
        sql = (
            f"SELECT * FROM (SELECT {SELECT}, ROW_NUMBER() OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time DESC, i.id DESC) AS newest, "
            "MAX(i.event_time) OVER (PARTITION BY i.session_id) AS last, "
            "MAX(i.event_time) OVER () AS head FROM items i "
            "WHERE i.cube_id = %s AND i.tier = 'working' AND i.type = 'turn' "
            "AND i.status = ANY(%s)) AS w WHERE newest > %s OR last < head - %s "
            "ORDER BY event_time, id"
        )
        found = self.dict_rows(sql, (cube_id, LIVE, capacity, idle_s))
        return [rows.item_from_dict(r) for r in found]

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        if not item_ids:
            return {}
        sql = (
            "SELECT id, next_id FROM (SELECT i.id, LEAD(i.id) OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time, i.id) AS next_id FROM items i WHERE i.cube_id = %s "
            "AND i.type = 'turn' AND i.status = ANY(%s) AND i.session_id IN "
            "(SELECT session_id FROM items WHERE id = ANY(%s))) AS w "
            "WHERE id = ANY(%s) AND next_id IS NOT NULL"
        )
        wanted = list(item_ids)
        return {r[0]: r[1] for r in self.rows(sql, (cube_id, LIVE, wanted, wanted))}

    def record_access(self, counts: Mapping[str, int], at: datetime) -> None:
        if not counts:
            return
        with self.transaction() as conn:
            # One statement, ids in order: two writers lock the rows in the same order.
            conn.execute(
                "UPDATE items i SET access_count = i.access_count + c.n, last_accessed_at = %s "
                "FROM (SELECT unnest(%s::text[]) AS id, unnest(%s::int[]) AS n) AS c "
                "WHERE i.id = c.id",
                (at.timestamp(), sorted(counts), [counts[k] for k in sorted(counts)]),
            )

    def iter_items(self, cube_id: str) -> Iterator[MemoryItem]:
        sql = (
            f"SELECT {SELECT} FROM items i WHERE i.cube_id = %s AND i.vector IS NOT NULL "
            "AND i.id > %s ORDER BY i.id LIMIT 512"
        )
        # Keyset pages rather than one server-side cursor: the pool's connection is not held
        # while the caller works on a page.
        last = ""
        while True:
            page = self.dict_rows(sql, (cube_id, last))
            if not page:
                return
            yield from (rows.item_from_dict(r) for r in page)
            last = page[-1]["id"]

    def get_vectors(self, item_ids: Sequence[str]) -> Vectors:
        sql = "SELECT id, vector::real[] FROM items WHERE id = ANY(%s) AND vector IS NOT NULL"
        found = dict(self.rows(sql, (list(item_ids),)))
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
            writes.event(conn, None, cube_id, None, "reembed", after={"embedder": embedder})


def _existing(
    conn: Any, seen: dict[tuple[str, str], tuple[str, str]], item: MemoryItem
) -> str | None:
    """The id already stored (or earlier in this batch) for the item's external id, if any."""
    if item.external_id is None:
        return None
    key = (item.cube_id, item.external_id)
    hit = seen.get(key)
    if hit is None:
        # Two writers adding one external id at once: the second waits here for the first.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("\x1f".join(key),))
        row = conn.execute(
            "SELECT id, text FROM items WHERE cube_id = %s AND external_id = %s", key
        ).fetchone()
        hit = None if row is None else (row[0], row[1])
    if hit is None:
        return None
    stored_id = hit[0]

    def first() -> str | None:
        row = conn.execute(
            "SELECT snapshot FROM item_versions WHERE item_id = %s AND version = 1", (stored_id,)
        ).fetchone()
        return rows.first_text(None if row is None else row[0])

    return rows.resent(item, stored_id, hit[1], first)
