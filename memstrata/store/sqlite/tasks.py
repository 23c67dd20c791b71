"""``TaskQueue`` over the ``tasks`` table of an SQLite store.

Everything but how a claim takes its task is ``SQLTaskQueue``'s (shared with PostgreSQL).  Every
write runs in the store's ``transaction()`` (one writer, ``BEGIN IMMEDIATE``), which holds the
database's write lock from its first statement: a claim's read and update cannot interleave with
another thread's or process's, so no two workers get the same claim, and one ``UPDATE`` takes it.
"""

from __future__ import annotations

import json
from typing import Any

from memstrata.store.queue import LOST_WORKER, TASK_COLUMNS
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
        super().__init__(store)

    def _expire(self, conn: Any, now: float, skip: list[str]) -> None:
        conn.execute(_EXHAUSTED, {"now": now, "error": LOST_WORKER, "skip": json.dumps(skip)})

    def _take(self, conn: Any, now: float, lease_until: float, skip: list[str]) -> Any:
        params = {"now": now, "lease_until": lease_until, "skip": json.dumps(skip)}
        return conn.execute(_CLAIM, params).fetchone()
