"""``ErasureStore``: content removed for good (GDPR-style erasure and cube deletion).

Both writes leave tombstones (ids, times, ops) and remove everything said: item text and
fields, versions, vectors, full-text rows and event payloads.  The full-text index is then
optimised so no old segment keeps the words, and freed pages are zeroed (``secure_delete``),
so after a WAL checkpoint and ``VACUUM`` the content is nowhere in the files: ``compact``
does both (``memstrata vacuum``).
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memstrata.errors import StorageError
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import SQLiteDatabase

# An erased item keeps identity, placement and times; everything said in it goes.
_ERASE = (
    "UPDATE items SET text = '', key = NULL, keywords = '[]', tags = '[]', metadata = '{}', "
    "speaker = NULL, external_id = NULL, sources = '[]', status = 'deleted', expires_at = NULL, "
    "version = version + 1, updated_at = ?, seq = ? WHERE rid = ?"
)
_BLANK_EVENTS = "UPDATE events SET before = NULL, after = NULL, reason = NULL"
_OPTIMIZE = "INSERT INTO items_fts (items_fts) VALUES ('optimize')"


class SQLiteErasure(SQLiteDatabase):
    """``ErasureStore`` over the item, version, vector, full-text and event tables."""

    def cubes_with_items_of(self, user_id: str) -> list[str]:
        sql = "SELECT DISTINCT cube_id FROM items WHERE user_id = ? ORDER BY cube_id"
        return [r[0] for r in self.reader().execute(sql, (user_id,))]

    def expired_items(
        self, at: datetime, limit: int, cube_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        if cube_ids is not None and not cube_ids:
            return []  # "IN ()" is no use of the index SQLite is told to use: an error
        # The partial index items_expiry holds only items with an expiry (erasure clears it);
        # named, since the planner would rather walk every item of the cube by cube_id.
        sql = (
            "SELECT cube_id, id FROM items INDEXED BY items_expiry "
            "WHERE expires_at IS NOT NULL AND expires_at <= ?"
        )
        params: list[Any] = [at.timestamp()]
        if cube_ids is not None:
            sql += f" AND cube_id IN ({', '.join('?' * len(cube_ids))})"
            params.extend(cube_ids)
        sql += " ORDER BY expires_at, id LIMIT ?"
        return [(r[0], r[1]) for r in self.reader().execute(sql, [*params, limit])]

    def erase_items(
        self,
        item_ids: Sequence[str],
        actor: str,
        reason: str | None,
        *,
        subject: str | None = None,
    ) -> int:
        """Remove the content of items for good, leaving tombstones; returns how many.

        In one transaction: each item row keeps its id, cube, placement and times but loses its
        text, key, keywords, tags, metadata, speaker, external id and sources, and becomes
        ``deleted``; its versions, vector and full-text row go; its events keep op, time and
        actor with payloads blanked; tasks that name it are dropped (unless running); an
        ``erase`` event is added.  With ``subject`` (a data subject's erasure), each cube that
        lost items also gets one ``erase_subject`` event: ``{"subject_user_id", "items"}``.
        Items erased before are not counted again.
        """
        erased: dict[str, str] = {}
        with self.transaction() as conn:
            for start in range(0, len(item_ids), 500):
                chunk = list(item_ids[start : start + 500])
                erased.update(_erase_chunk(conn, chunk, actor, reason))
            if subject is not None:
                for cube_id, count in sorted(Counter(erased.values()).items()):
                    after = {"subject_user_id": subject, "items": count}
                    writes.event(conn, actor, cube_id, None, "erase_subject", after=after,
                                 reason=reason)  # fmt: skip
            if erased:
                conn.execute(_OPTIMIZE)
        self._forget(set(erased.values()))
        return len(erased)

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """Delete a cube and everything in it; returns how many items went.

        Items, versions, vectors, full-text rows, tasks, grants, artifacts and usage go; the
        cube's events stay as tombstones (op, time, actor) with their payloads blanked.
        """
        with self.transaction() as conn:
            in_cube = "SELECT rid FROM items WHERE cube_id = ?"
            conn.execute(f"DELETE FROM items_fts WHERE rowid IN ({in_cube})", (cube_id,))
            conn.execute(f"DELETE FROM vectors WHERE rid IN ({in_cube})", (cube_id,))
            conn.execute(
                "DELETE FROM item_versions WHERE item_id IN "
                "(SELECT id FROM items WHERE cube_id = ?)",
                (cube_id,),
            )
            count = conn.execute("DELETE FROM items WHERE cube_id = ?", (cube_id,)).rowcount
            for table in ("tasks", "grants", "artifacts", "llm_usage", "llm_usage_daily"):
                conn.execute(f"DELETE FROM {table} WHERE cube_id = ?", (cube_id,))
            conn.execute(f"{_BLANK_EVENTS} WHERE cube_id = ?", (cube_id,))
            conn.execute("DELETE FROM cubes WHERE cube_id = ?", (cube_id,))
            writes.event(conn, actor, cube_id, None, "delete_cube", after={"items": count})
            conn.execute(_OPTIMIZE)
        self._forget([cube_id])
        return int(count)

    def compact(self, actor: str) -> dict[str, int]:
        """Checkpoint the WAL, ``VACUUM`` (the file rewritten without its free pages) and
        checkpoint again, truncating the WAL; then record a ``vacuum`` event.  Holds the writer
        for the whole rewrite (seconds per hundred MB): other writes wait, reads go on."""
        before = self._file_bytes()
        with self._lock:
            try:
                for statement in ("PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM",
                                  "PRAGMA wal_checkpoint(TRUNCATE)"):  # fmt: skip
                    self._writer.execute(statement).fetchall()
            except sqlite3.Error as exc:
                raise StorageError(f"vacuum of {self.path} failed: {exc}") from exc
        sizes = {"bytes_before": before, "bytes_after": self._file_bytes()}
        with self.transaction() as conn:
            writes.event(conn, actor, None, None, "vacuum", after=sizes)
        self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return sizes

    def _file_bytes(self) -> int:
        """The size of the database file and its WAL, in bytes (0 in memory)."""
        found = [Path(self.path), Path(f"{self.path}-wal")]
        return sum(p.stat().st_size for p in found if not self._in_memory and p.exists())


def _erase_chunk(
    conn: sqlite3.Connection, chunk: list[str], actor: str, reason: str | None
) -> list[tuple[str, str]]:
    """Erase the items of ``chunk`` (at most 500 ids) not erased before; their (id, cube)."""
    marks = ", ".join("?" * len(chunk))
    found = conn.execute(  # tombstones (erased before) are not counted again
        f"SELECT rid, id, cube_id FROM items WHERE id IN ({marks}) "
        "AND NOT (status = 'deleted' AND text = '')",
        chunk,
    ).fetchall()
    if not found:
        return []
    rids = [r[0] for r in found]
    rid_marks = ", ".join("?" * len(rids))
    conn.execute(f"DELETE FROM items_fts WHERE rowid IN ({rid_marks})", rids)
    conn.execute(f"DELETE FROM vectors WHERE rid IN ({rid_marks})", rids)
    conn.execute(f"DELETE FROM item_versions WHERE item_id IN ({marks})", chunk)
    conn.execute(f"{_BLANK_EVENTS} WHERE item_id IN ({marks})", chunk)
    seq = writes.next_seq(conn, len(found))
    for n, (rid, item_id, cube_id) in enumerate(found):
        conn.execute(_ERASE, (time.time(), seq - n, rid))
        conn.execute(
            "DELETE FROM tasks WHERE status != 'running' AND payload LIKE ?", (f"%{item_id}%",)
        )
        writes.event(conn, actor, cube_id, item_id, "erase", reason=reason)
    return [(item_id, cube_id) for _, item_id, cube_id in found]
