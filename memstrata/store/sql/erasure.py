"""``ErasureStore`` for both engines: content removed for good (GDPR-style erasure and cube
deletion), and the items whose expiry has passed.

Both writes leave tombstones (ids, times, ops) and remove everything said: item text and fields,
versions, the full text and the vector (the engine's ``Layout``), event
payloads and queued tasks naming the items, in one transaction.  ``compact`` (rewriting the
files so that what was removed leaves them) is the engine's.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memstrata.errors import MemCubeError
from memstrata.store import artifacts
from memstrata.store.sql import writes
from memstrata.store.sql.database import SQLDatabase

#: What an erased item loses (identity, placement and times stay); the engine adds its own
#: columns (full text, vector) and a fresh change sequence number.
ERASED = (
    "text = '', key = NULL, keywords = '[]', tags = '[]', metadata = '{}', speaker = NULL, "
    "external_id = NULL, sources = '[]', status = 'deleted', expires_at = NULL, "
    "version = version + 1"
)
_BLANK_EVENTS = "UPDATE events SET before = NULL, after = NULL, reason = NULL"
#: Tables whose rows of a deleted cube go with it (its events stay, blanked).
_CUBE_TABLES = ("tasks", "grants", "artifacts", "llm_usage", "llm_usage_daily")


class SQLErasure(SQLDatabase):
    """``ErasureStore`` but ``compact``: erasure, cube deletion, expired items."""

    def cubes_with_items_of(self, user_id: str) -> list[str]:
        m = self.dialect.mark
        sql = f"SELECT DISTINCT cube_id FROM items WHERE user_id = {m} ORDER BY cube_id"
        return [r[0] for r in self.rows(sql, (user_id,))]

    def expired_items(
        self, at: datetime, limit: int, cube_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        d = self.dialect
        if cube_ids is not None and not cube_ids:
            return []
        # The partial index items_expiry holds only items with an expiry (erasure clears it);
        # named where the engine takes a hint, since SQLite's planner would rather walk every
        # item of the cube by cube_id.
        sql = (
            f"SELECT cube_id, id FROM items{d.indexed_by('items_expiry')} "
            f"WHERE expires_at IS NOT NULL AND expires_at <= {d.mark}"
        )
        params: list[Any] = [at.timestamp()]
        if cube_ids is not None:
            among, param = d.among("cube_id", cube_ids)
            sql += f" AND {among}"
            params.append(param)
        sql += f" ORDER BY expires_at, id LIMIT {d.mark}"
        return [(r[0], r[1]) for r in self.rows(sql, [*params, limit])]

    def erase_items(
        self,
        item_ids: Sequence[str],
        cube_ids: Sequence[str],
        actor: str,
        reason: str | None,
        *,
        subject: str | None = None,
    ) -> int:
        """Remove the content of these items of ``cube_ids`` for good, leaving tombstones;
        returns how many (ids of other cubes are left alone).

        In one transaction: each item row keeps its id, cube, placement and times but loses its
        text, key, keywords, tags, metadata, speaker, external id and sources, and becomes
        ``deleted``; its versions, vector and full text go; its events keep op, time and actor
        with payloads blanked; tasks that name it are dropped (unless running); an ``erase``
        event is added.  With ``subject`` (a data subject's erasure), each cube that lost items
        also gets one ``erase_subject`` event: ``{"subject_user_id", "items"}``.  Items erased
        before are not counted again.
        """
        d = self.dialect
        with self.transaction() as conn:
            wanted = (list(dict.fromkeys(item_ids)), list(dict.fromkeys(cube_ids)))
            erased = self._erase(conn, wanted, actor, reason) if all(wanted) else []
            if subject is not None:
                for cube_id, count in sorted(Counter(c for _, c in erased).items()):
                    after = {"subject_user_id": subject, "items": count}
                    writes.event(d, conn, actor, cube_id, None, "erase_subject", after=after,
                                 reason=reason)  # fmt: skip
        self._forget({c for _, c in erased})
        return len(erased)

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """Delete a cube and everything in it, then its artifact files; how many items went.

        Items, versions, vectors, full text, tasks, grants, artifacts and usage go; the cube's
        events stay as tombstones (op, time, actor) with their payloads blanked.
        """
        d = self.dialect
        m = d.mark
        with self.transaction() as conn:
            self.layout.drop_cube_rows(conn, cube_id)
            # Through the cube's items: SQLite keys versions by (item_id, version), and a bare
            # cube_id condition there scans every version of every cube.
            conn.execute(
                f"DELETE FROM item_versions WHERE cube_id = {m} AND item_id IN "
                f"(SELECT id FROM items WHERE cube_id = {m})",
                (cube_id, cube_id),
            )
            count = conn.execute(f"DELETE FROM items WHERE cube_id = {m}", (cube_id,)).rowcount
            for table in _CUBE_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE cube_id = {m}", (cube_id,))
            conn.execute(f"{_BLANK_EVENTS} WHERE cube_id = {m}", (cube_id,))
            conn.execute(f"DELETE FROM cubes WHERE cube_id = {m}", (cube_id,))
            writes.event(d, conn, actor, cube_id, None, "delete_cube", after={"items": count})
        self._forget([cube_id])
        with contextlib.suppress(MemCubeError):  # a store without an artifact folder has none
            artifacts.remove_folder(self.artifact_dir(cube_id))
        return int(count)

    def _erase(
        self, conn: Any, wanted: tuple[list[str], list[str]], actor: str, reason: str | None
    ) -> list[tuple[str, str]]:
        """Erase the items of ``wanted`` (ids, cubes) not erased before; their (id, cube)."""
        d = self.dialect
        among, param = d.among("id", wanted[0])
        cubes, cube_param = d.among("cube_id", wanted[1])
        found = [
            (str(r[0]), str(r[1]))
            for r in conn.execute(  # tombstones (erased before) are not counted again
                f"SELECT id, cube_id FROM items WHERE {cubes} AND {among} "
                f"AND NOT (status = 'deleted' AND text = '') ORDER BY id{d.for_update}",
                (cube_param, param),
            ).fetchall()
        ]
        if not found:
            return []
        ids = [item_id for item_id, _ in found]
        among, param = d.among("item_id", ids)
        held = sorted({cube_id for _, cube_id in found})
        cubes, cube_param = d.among("cube_id", held)
        conn.execute(f"DELETE FROM item_versions WHERE {cubes} AND {among}", (cube_param, param))
        conn.execute(f"{_BLANK_EVENTS} WHERE {cubes} AND {among}", (cube_param, param))
        self.layout.tombstone(conn, ids, held)
        for item_id, cube_id in found:
            conn.execute(
                f"DELETE FROM tasks WHERE status != 'running' AND {d.contains('payload')}",
                (item_id,),
            )
            writes.event(d, conn, actor, cube_id, item_id, "erase", reason=reason)
        return found
