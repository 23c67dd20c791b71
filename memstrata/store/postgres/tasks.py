"""``TaskQueue`` over the ``tasks`` table of a PostgreSQL store (when no Redis is configured).

Everything but how a claim takes its task is ``SQLTaskQueue``'s (shared with SQLite).  SQLite
has one writer; here a claim locks the row it takes with ``FOR UPDATE SKIP LOCKED``, so
concurrent workers (threads or processes) pass over each other's candidates instead of queueing
on them, and no two get the same claim.
"""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row

from memstrata.store.postgres.connection import PostgresDatabase
from memstrata.store.queue import LOST_WORKER, TASK_COLUMNS
from memstrata.store.sqlqueue import SQLTaskQueue

_EXPIRED = "status = 'running' AND run_after <= %(now)s AND lease_until <= %(now)s " \
    "AND NOT (task_id = ANY(%(skip)s))"  # fmt: skip
# Expired leases first (their worker is gone), then the pending task due longest ago; rows
# another claimer holds locked are passed over.
_CANDIDATES = (
    f"SELECT task_id FROM tasks WHERE {_EXPIRED} AND attempts < max_attempts "
    "ORDER BY run_after LIMIT 1 FOR UPDATE SKIP LOCKED",
    "SELECT task_id FROM tasks WHERE status = 'pending' AND run_after <= %(now)s "
    "ORDER BY run_after LIMIT 1 FOR UPDATE SKIP LOCKED",
)
_CLAIM = f"""
UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_until = %(lease_until)s,
    updated_at = %(now)s
WHERE task_id = %(task_id)s
RETURNING {TASK_COLUMNS}
"""
_EXHAUSTED = f"""
UPDATE tasks SET status = 'failed', lease_until = NULL, updated_at = %(now)s,
    error = coalesce(error || ' | ', '') || %(error)s
WHERE task_id IN (SELECT task_id FROM tasks WHERE {_EXPIRED} AND attempts >= max_attempts
    FOR UPDATE SKIP LOCKED)
"""


class PostgresTaskQueue(SQLTaskQueue):
    """``TaskQueue`` stored in ``store``'s database; thread- and process-safe."""

    def __init__(self, store: PostgresDatabase) -> None:
        super().__init__(store)

    def _expire(self, conn: Any, now: float, skip: list[str]) -> None:
        conn.execute(_EXHAUSTED, {"now": now, "skip": skip, "error": LOST_WORKER})

    def _take(self, conn: Any, now: float, lease_until: float, skip: list[str]) -> Any:
        params = {"now": now, "skip": skip, "lease_until": lease_until}
        for candidates in _CANDIDATES:
            found = conn.execute(candidates, params).fetchone()
            if found is not None:
                cursor = conn.cursor(row_factory=dict_row)
                return cursor.execute(_CLAIM, {**params, "task_id": found[0]}).fetchone()
        return None
