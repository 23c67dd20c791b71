"""``ItemStore`` for both engines: the item rows, their versions and events.

Every item write takes fresh change sequence numbers, rewrites the full text when the indexed
words change, keeps a version snapshot (unless told not to) and appends an event, all in one
transaction.  Where an item's full text and vector live is the engine's (``SQLDatabase`` hooks);
what an item is, the external-id rule and the version check are written here once.  An update
reads its row with the dialect's row lock (PostgreSQL: ``FOR UPDATE``), so two concurrent writers
of one item are serialised and the second sees the first's version (``ConflictError``).

Every statement names the cube of the items it reads or writes (an item's key is
``(cube_id, id)`` on PostgreSQL), but ``item_cubes``: the one lookup of an item by id alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from memstrata.errors import ConflictError, ItemNotFound
from memstrata.filters import Filters
from memstrata.model import MemoryItem, utcnow
from memstrata.store import rows
from memstrata.store.base import Vectors
from memstrata.store.sql import writes
from memstrata.store.sql.clauses import LIVE, SELECT, filter_sql
from memstrata.store.sql.database import SQLDatabase
from memstrata.store.sql.dialect import Dialect

#: The key space of ``Dialect.lock`` for external ids (the task queue's dedupe keys are 1).
EXTERNAL_ID_LOCKS = 0
#: Items read per page by ``iter_items`` (a keyset page: no connection is held between pages).
PAGE = 512


class SQLItems(SQLDatabase):
    """``ItemStore``'s calls but the vector ones (the engine's): items, versions, events."""

    #: the condition that item ``i`` has a vector (the engine's layout)
    HAS_VECTOR = "TRUE"

    def add_items(self, items: Sequence[MemoryItem], vectors: Vectors, embedder: str) -> list[str]:
        with self.transaction() as conn:
            ids: list[str] = []
            fresh: list[tuple[MemoryItem, Any]] = []
            seen: dict[tuple[str, str], tuple[str, str]] = {}
            for item, vector in zip(items, vectors, strict=True):
                existing = self._existing(conn, seen, item)
                if existing is not None:
                    ids.append(existing)
                    continue
                if item.external_id is not None:
                    seen[(item.cube_id, item.external_id)] = (item.id, item.text)
                fresh.append((item, vector))
                ids.append(item.id)
            self.layout.insert_items(conn, [f[0] for f in fresh], [f[1] for f in fresh], embedder)
            if fresh:
                writes.created(self.dialect, conn, [f[0] for f in fresh])
        for cube_id in dict.fromkeys(item.cube_id for item, _ in fresh):
            self._added(cube_id, sum(1 for item, _ in fresh if item.cube_id == cube_id))
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
        d = self.dialect
        with self.transaction() as conn:
            found = d.dicts(
                conn,
                f"SELECT {SELECT} FROM items i WHERE i.cube_id = {d.mark} AND i.id = {d.mark}"
                f"{d.for_update}",
                (item.cube_id, item.id),
            )
            if not found:
                raise ItemNotFound(item.id)
            old = rows.item_from_dict(found[0])
            check_version(old, item)
            new = replace(item, version=old.version + 1, updated_at=utcnow())
            self.layout.rewrite(conn, old, new, vector)
            if snapshot:
                writes.version(d, conn, new, actor, reason)
            before, after = rows.changes(old, new)
            writes.event(d, conn, actor, new.cube_id, new.id, op, before=before, after=after,
                         version=new.version, reason=reason)  # fmt: skip
        return new

    def get_items(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids or not cube_ids:
            return []
        d = self.dialect
        cubes, cube_param = d.among("i.cube_id", list(dict.fromkeys(cube_ids)))
        among, param = d.among("i.id", item_ids)
        sql = f"SELECT {SELECT} FROM items i WHERE {cubes} AND {among}"
        found = {r["id"]: rows.item_from_dict(r) for r in self.dicts(sql, (cube_param, param))}
        return [found[i] for i in item_ids if i in found]

    def item_cubes(self, item_ids: Sequence[str]) -> dict[str, str]:
        if not item_ids:
            return {}
        with self.connection() as conn:
            return cubes_of(self.dialect, conn, item_ids)

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
        d = self.dialect
        where, params = filter_sql(d, filters)
        direction = d.order(descending)
        sql = (
            f"SELECT {SELECT} FROM items i WHERE i.cube_id = {d.mark} AND {where} "
            f"ORDER BY i.{order} {direction}, i.id {direction} LIMIT {d.mark} OFFSET {d.mark}"
        )
        page = [d.no_limit if limit is None else limit, offset]
        return [rows.item_from_dict(r) for r in self.dicts(sql, [cube_id, *params, *page])]

    def count_items(self, cube_id: str, filters: Filters) -> int:
        where, params = filter_sql(self.dialect, filters)
        sql = f"SELECT count(*) FROM items i WHERE i.cube_id = {self.dialect.mark} AND {where}"
        found = self.row(sql, [cube_id, *params])
        return int(found[0]) if found else 0

    def overflowing_turns(
        self, cube_id: str, capacity: int, idle_s: float | None = None
    ) -> list[MemoryItem]:
        m = self.dialect.mark
        # "last": the session's newest turn; "head": the cube's newest working turn.
        sql = (
            f"SELECT * FROM (SELECT {SELECT}, ROW_NUMBER() OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time DESC, i.id DESC) AS newest, "
            "MAX(i.event_time) OVER (PARTITION BY i.session_id) AS last, "
            "MAX(i.event_time) OVER () AS head FROM items i "
            f"WHERE i.cube_id = {m} AND i.tier = 'working' AND i.type = 'turn' "
            f"AND i.status IN ({LIVE})) AS w WHERE newest > {m} OR last < head - {m} "
            "ORDER BY event_time, id"
        )
        return [rows.item_from_dict(r) for r in self.dicts(sql, (cube_id, capacity, idle_s))]

    def record_access(self, cube_id: str, counts: Mapping[str, int], at: datetime) -> None:
        if not counts:
            return
        m = self.dialect.mark
        sql = (
            f"UPDATE items SET access_count = access_count + {m}, last_accessed_at = {m} "
            f"WHERE cube_id = {m} AND id = {m}"
        )
        with self.transaction() as conn:
            # Ids in order: two writers lock the rows they share in the same order.
            self.dialect.executemany(
                conn, sql, [(counts[i], at.timestamp(), cube_id, i) for i in sorted(counts)]
            )

    def iter_items(self, cube_id: str) -> Iterator[MemoryItem]:
        m = self.dialect.mark
        sql = (
            f"SELECT {SELECT} FROM items i WHERE i.cube_id = {m} AND {self.HAS_VECTOR} "
            f"AND i.id > {m} ORDER BY i.id LIMIT {PAGE}"
        )
        # Keyset pages rather than one open cursor: no connection is held while the caller
        # works on a page, and a driver error is raised (mapped) by the read that met it.
        last = ""
        while True:
            page = self.dicts(sql, (cube_id, last))
            if not page:
                return
            yield from (rows.item_from_dict(r) for r in page)
            last = page[-1]["id"]

    def _existing(
        self, conn: Any, seen: dict[tuple[str, str], tuple[str, str]], item: MemoryItem
    ) -> str | None:
        """The id already stored (or earlier in this batch) for the item's external id, if any."""
        if item.external_id is None:
            return None
        d = self.dialect
        key = (item.cube_id, item.external_id)
        hit = seen.get(key)
        if hit is None:
            # Two writers adding one external id at once: the second waits for the first.
            d.lock(conn, "\x1f".join(key), EXTERNAL_ID_LOCKS)
            row = conn.execute(
                f"SELECT id, text FROM items WHERE cube_id = {d.mark} AND external_id = {d.mark}",
                key,
            ).fetchone()
            hit = None if row is None else (row[0], row[1])
        if hit is None:
            return None
        stored_id = hit[0]

        def first() -> str | None:
            row = conn.execute(
                f"SELECT snapshot FROM item_versions WHERE cube_id = {d.mark} "
                f"AND item_id = {d.mark} AND version = 1",
                (item.cube_id, stored_id),
            ).fetchone()
            return rows.first_text(None if row is None else row[0])

        return rows.resent(item, stored_id, hit[1], first)


def cubes_of(d: Dialect, conn: Any, item_ids: Sequence[str]) -> dict[str, str]:
    """The cube of each of these items that is stored, by id: the one item query that names no
    cube (on a sharded PostgreSQL it reads the ``items_id`` index of every node)."""
    among, param = d.among("id", item_ids)
    found = conn.execute(f"SELECT id, cube_id FROM items WHERE {among}", (param,)).fetchall()
    return {str(r[0]): str(r[1]) for r in found}


def check_version(stored: MemoryItem, given: MemoryItem) -> None:
    """``ConflictError`` unless ``given`` is of the stored version (it changed since read)."""
    if stored.version != given.version:
        raise ConflictError(
            f"item {given.id!r} changed since it was read (version {stored.version}, "
            f"not {given.version})",
            hint="read it again and retry",
        )
