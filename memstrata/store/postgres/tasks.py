"""``TaskQueue`` over the ``tasks`` table of a PostgreSQL store (when no Redis is configured).

The semantics of ``memstrata/store/sqlite/tasks.py``; the reads and outcome writes are
``SQLTaskQueue``'s, shared with it.  What differs is how claims exclude each other: SQLite has one writer, here a claim locks the
row it takes with ``FOR UPDATE SKIP LOCKED``, so concurrent workers (threads or processes) pass
over each other's candidates instead of queueing on them, and no two get the same claim.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

from memstrata.model import new_id
from memstrata.store.postgres.connection import PostgresDatabase
from memstrata.store.queue import (
    LOST_WORKER,
    MAX_QUARANTINED_PER_CLAIM,
    TASK_COLUMNS,
    Task,
    check_positive,
    checked_submit,
)
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
                # Submitters of one key queue here, so the key's holder is read once.
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (dedupe_key,))
                held = conn.execute(
                    "SELECT task_id, status FROM tasks WHERE dedupe_key = %s", (dedupe_key,)
                ).fetchone()
                if held is not None and held[1] == "pending":
                    return str(held[0])
                if held is not None:  # running or finished: the key goes to the follow-up
                    conn.execute(
                        "UPDATE tasks SET dedupe_key = NULL WHERE task_id = %s", (held[0],)
                    )
            task_id = new_id()
            conn.execute(
                f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES (%s, %s, %s, %s, 'pending', 0, %s, %s, "
                "NULL, NULL, %s, %s, %s)",
                (task_id, kind, cube_id, body, max_attempts, now + delay_s, now, now, dedupe_key),
            )
        return task_id

    def claim(self, lease_s: float, *, skip: Collection[str] = ()) -> Task | None:
        check_positive("lease_s", lease_s)
        now = time.time()
        params: dict[str, Any] = {"now": now, "skip": list(skip), "error": LOST_WORKER}
        with self.store.transaction() as conn:
            conn.execute(_EXHAUSTED, params)
            # A row that is not a task is quarantined and the claim goes on to the next one.
            for _ in range(MAX_QUARANTINED_PER_CLAIM + 1):
                row = _take(conn, {**params, "lease_until": now + lease_s})
                if row is None:
                    return None
                task = self._claimed(conn, row, now)
                if task is not None:
                    return task
        return None

    mark = "%s"

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return self.store.dict_rows(sql, params)

    def _transaction(self) -> AbstractContextManager[Any]:
        return self.store.transaction()

    def _among(self, cube_ids: list[str]) -> tuple[str, Any]:
        return "cube_id = ANY(%s)", cube_ids


def _take(conn: Any, params: dict[str, Any]) -> Any:
    """Claim the first candidate (expired leases, then due pending tasks) in transaction
    ``conn``: its row (a dict), or ``None`` when no task is due."""
    for candidates in _CANDIDATES:
        found = conn.execute(candidates, params).fetchone()
        if found is not None:
            cursor = conn.cursor(row_factory=_dict_row())
            return cursor.execute(_CLAIM, {**params, "task_id": found[0]}).fetchone()
    return None


def _dict_row() -> Any:
    from psycopg.rows import dict_row

    return dict_row
