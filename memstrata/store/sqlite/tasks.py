"""``TaskQueue`` over the ``tasks`` table of an SQLite store.

The reads and outcome writes are ``SQLTaskQueue``'s (shared with PostgreSQL); ``submit`` and
``claim`` are this engine's.  Every write runs in the store's ``transaction()`` (one writer, ``BEGIN IMMEDIATE``), which holds
the database's write lock from its first statement: a claim's read and update cannot interleave
with another thread's or process's, so no two workers get the same claim.  Reads use the calling
thread's reader connection.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

from memstrata.model import new_id
from memstrata.store.queue import (
    LOST_WORKER,
    MAX_QUARANTINED_PER_CLAIM,
    TASK_COLUMNS,
    Task,
    check_positive,
    checked_submit,
)
from memstrata.store.sqlite.connection import SQLiteDatabase
from memstrata.store.sqlqueue import SQLTaskQueue

# Expired leases first (their worker is gone and they have waited longest), then the pending task
# due longest ago.  Two scalar subqueries rather than one OR, so each walks ``tasks_ready``
# (status, run_after); ``run_after <= :now`` always holds for a running task and is there for that.
# ``:skip`` (a JSON array) holds the caller's own running tasks: alive, whatever their lease says.
_EXPIRED = """status = 'running' AND run_after <= :now AND lease_until <= :now
    AND task_id NOT IN (SELECT value FROM json_each(:skip))"""
_CLAIM = f"""
UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_until = :lease_until,
    updated_at = :now
WHERE task_id = coalesce(
    (SELECT task_id FROM tasks WHERE {_EXPIRED} ORDER BY run_after LIMIT 1),
    (SELECT task_id FROM tasks WHERE status = 'pending' AND run_after <= :now
        ORDER BY run_after LIMIT 1))
RETURNING {TASK_COLUMNS}
"""
_EXHAUSTED = f"""
UPDATE tasks SET status = 'failed', lease_until = NULL, updated_at = :now,
    error = coalesce(error || ' | ', '') || :error
WHERE {_EXPIRED} AND attempts >= max_attempts
"""


class SQLiteTaskQueue(SQLTaskQueue):
    """``TaskQueue`` stored in ``store``'s file; thread- and process-safe (see the module doc)."""

    def __init__(self, store: SQLiteDatabase) -> None:
        self.store = store

    def submit(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        cube_id: str | None = None,
        dedupe_key: str | None = None,
        max_attempts: int = 5,
        delay_s: float = 0.0,
    ) -> str:
        body = checked_submit(kind, payload, max_attempts, delay_s)
        now = time.time()
        with self.store.transaction() as conn:
            if dedupe_key is not None:
                held = _take_key(conn, dedupe_key)
                if held is not None:
                    return held
            task_id = new_id()
            conn.execute(
                f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, NULL, "
                "NULL, ?, ?, ?)",
                (task_id, kind, cube_id, body, max_attempts, now + delay_s, now, now, dedupe_key),
            )
        return task_id

    def claim(self, lease_s: float, *, skip: Collection[str] = ()) -> Task | None:
        check_positive("lease_s", lease_s)
        now = time.time()
        skipped = json.dumps(list(skip))
        with self.store.transaction() as conn:
            conn.execute(_EXHAUSTED, {"now": now, "error": LOST_WORKER, "skip": skipped})
            params = {"now": now, "lease_until": now + lease_s, "skip": skipped}
            # A row that is not a task is quarantined and the claim goes on to the next one.
            for _ in range(MAX_QUARANTINED_PER_CLAIM + 1):
                row = conn.execute(_CLAIM, params).fetchone()
                if row is None:
                    return None
                task = self._claimed(conn, row, now)
                if task is not None:
                    return task
        return None

    def _among(self, cube_ids: list[str]) -> tuple[str, Any]:
        return "cube_id IN (SELECT value FROM json_each(?))", json.dumps(cube_ids)

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return self.store.reader().execute(sql, params).fetchall()

    def _transaction(self) -> AbstractContextManager[Any]:
        return self.store.transaction()


def _take_key(conn: sqlite3.Connection, dedupe_key: str) -> str | None:
    """The id of the pending task holding ``dedupe_key``; else free the key from its old holder.

    A running task gives its key up: what is submitted while it runs may depend on data it has
    already read, so it must run again after it (a follow-up), not be folded into it.
    """
    row = conn.execute(
        "SELECT task_id, status FROM tasks WHERE dedupe_key = ?", (dedupe_key,)
    ).fetchone()
    if row is None:
        return None
    if row["status"] == "pending":
        return str(row["task_id"])
    conn.execute("UPDATE tasks SET dedupe_key = NULL WHERE task_id = ?", (row["task_id"],))
    return None
