"""``ErasureStore``: content removed for good (GDPR-style erasure and cube deletion).

Both writes leave tombstones (ids, times, ops) and remove everything said: item text and fields,
versions, the full-text vector, the embedding and event payloads, in one transaction.  PostgreSQL
keeps the old row versions until they are vacuumed: ``VACUUM FULL`` (or a routine ``VACUUM`` and
time) removes them from the table files: ``compact`` runs ``VACUUM FULL`` on the tables that hold
content (``memstrata vacuum``); docs/deploy.md says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from memstrata.errors import StorageError
from memstrata.store.postgres import writes
from memstrata.store.postgres.connection import PostgresDatabase, first_line

# An erased item keeps identity, placement and times; everything said in it goes.
_ERASE = (
    "UPDATE items SET text = '', key = NULL, keywords = '[]', tags = '[]', metadata = '{}', "
    "speaker = NULL, external_id = NULL, sources = '[]', status = 'deleted', tsv = NULL, "
    "expires_at = NULL, "
    "doclen = 0, vector = NULL, dim = NULL, embedder = NULL, version = version + 1, "
    "updated_at = extract(epoch FROM clock_timestamp()), seq = nextval('item_seq') "
    "WHERE id = ANY(%s)"
)
_BLANK_EVENTS = "UPDATE events SET before = NULL, after = NULL, reason = NULL"
# The tables whose rows hold what was said (a vector and full text are columns of ``items``).
_CONTENT_TABLES = ("items", "item_versions", "events", "tasks")
_SIZE = "SELECT sum(pg_total_relation_size(t::regclass))::bigint FROM unnest(%s::text[]) AS t"


class PostgresErasure(PostgresDatabase):
    """``ErasureStore`` over the item, version and event tables."""

    def cubes_with_items_of(self, user_id: str) -> list[str]:
        sql = "SELECT DISTINCT cube_id FROM items WHERE user_id = %s ORDER BY cube_id"
        return [r[0] for r in self.rows(sql, (user_id,))]

    def expired_items(
        self, at: datetime, limit: int, cube_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        # The partial index items_expiry holds only items with an expiry (erasure clears it).
        scope = "" if cube_ids is None else " AND cube_id = ANY(%(cubes)s)"
        sql = (
            "SELECT cube_id, id FROM items WHERE expires_at IS NOT NULL AND expires_at <= %(at)s"
            f"{scope} ORDER BY expires_at, id LIMIT %(limit)s"
        )
        params = {"at": at.timestamp(), "cubes": list(cube_ids or []), "limit": limit}
        return [(r[0], r[1]) for r in self.rows(sql, params)]

    def erase_items(
        self,
        item_ids: Sequence[str],
        actor: str,
        reason: str | None,
        *,
        subject: str | None = None,
    ) -> int:
        """Remove the content of items for good, leaving tombstones; returns how many (see
        ``memstrata/store/sqlite/erasure.py`` for what stays: the same here)."""
        erased: dict[str, str] = {}
        with self.transaction() as conn:
            erased.update(_erase(conn, list(dict.fromkeys(item_ids)), actor, reason))
            if subject is not None:
                for cube_id, count in sorted(Counter(erased.values()).items()):
                    after = {"subject_user_id": subject, "items": count}
                    writes.event(conn, actor, cube_id, None, "erase_subject", after=after,
                                 reason=reason)  # fmt: skip
        self._forget(set(erased.values()))
        return len(erased)

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """Delete a cube and everything in it; returns how many items went."""
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM item_versions WHERE item_id IN "
                "(SELECT id FROM items WHERE cube_id = %s)",
                (cube_id,),
            )
            count = conn.execute("DELETE FROM items WHERE cube_id = %s", (cube_id,)).rowcount
            for table in ("tasks", "grants", "artifacts", "llm_usage", "llm_usage_daily"):
                conn.execute(f"DELETE FROM {table} WHERE cube_id = %s", (cube_id,))
            conn.execute(f"{_BLANK_EVENTS} WHERE cube_id = %s", (cube_id,))
            conn.execute("DELETE FROM cubes WHERE cube_id = %s", (cube_id,))
            writes.event(conn, actor, cube_id, None, "delete_cube", after={"items": count})
        self._forget([cube_id])
        return int(count)

    def compact(self, actor: str) -> dict[str, int]:
        """``VACUUM FULL`` the tables that hold content (old row versions of erased items
        leave the table files), then record a ``vacuum`` event.  ``VACUUM FULL`` locks each
        table while it is rewritten: other calls wait for it."""
        tables = list(_CONTENT_TABLES)
        with self._connect() as conn:  # autocommit: VACUUM runs outside a transaction
            try:
                before = int(conn.execute(_SIZE, (tables,)).fetchone()[0])
                conn.execute(f"VACUUM FULL {', '.join(tables)}")
                after = int(conn.execute(_SIZE, (tables,)).fetchone()[0])
            except psycopg.Error as exc:
                raise StorageError(f"vacuum of {self.where} failed: {first_line(exc)}") from exc
        sizes = {"bytes_before": before, "bytes_after": after}
        with self.transaction() as conn:
            writes.event(conn, actor, None, None, "vacuum", after=sizes)
        return sizes


def _erase(conn: Any, wanted: list[str], actor: str, reason: str | None) -> list[tuple[str, str]]:
    """Erase the items of ``wanted`` not erased before; their (id, cube)."""
    found = conn.execute(  # tombstones (erased before) are not counted again
        "SELECT id, cube_id FROM items WHERE id = ANY(%s) "
        "AND NOT (status = 'deleted' AND text = '') ORDER BY id FOR UPDATE",
        (wanted,),
    ).fetchall()
    if not found:
        return []
    ids = [r[0] for r in found]
    conn.execute("DELETE FROM item_versions WHERE item_id = ANY(%s)", (ids,))
    conn.execute(f"{_BLANK_EVENTS} WHERE item_id = ANY(%s)", (ids,))
    conn.execute(_ERASE, (ids,))
    for item_id, cube_id in found:
        conn.execute(
            "DELETE FROM tasks WHERE status != 'running' AND strpos(payload, %s) > 0", (item_id,)
        )
        writes.event(conn, actor, cube_id, item_id, "erase", reason=reason)
    return [(r[0], r[1]) for r in found]
