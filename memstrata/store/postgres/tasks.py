"""``TaskQueue`` over the ``tasks`` table of a PostgreSQL store (when no Redis is configured).

The semantics of ``memstrata/store/sqlite/tasks.py``, whose checks and row mapping it shares;
what differs is how claims exclude each other: SQLite has one writer, here a claim locks the
row it takes with ``FOR UPDATE SKIP LOCKED``, so concurrent workers (threads or processes) pass
over each other's candidates instead of queueing on them, and no two get the same claim.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from memstrata.errors import ValidationError
from memstrata.model import new_id
from memstrata.store.postgres.connection import PostgresDatabase
from memstrata.store.queue import (
    LOST_WORKER,
    TASK_COLUMNS,
    TASK_STATUSES,
    Task,
    TaskStatus,
    check_non_negative,
    check_positive,
    checked_submit,
    task_from_row,
    truncate_error,
)

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


class PostgresTaskQueue:
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
            found = None
            for candidates in _CANDIDATES:
                found = conn.execute(candidates, params).fetchone()
                if found is not None:
                    break
            if found is None:
                return None
            cursor = conn.cursor(row_factory=_dict_row())
            row = cursor.execute(
                _CLAIM, {**params, "lease_until": now + lease_s, "task_id": found[0]}
            ).fetchone()
        return None if row is None else task_from_row(row)

    def renew(self, task_id: str, lease_s: float, *, attempt: int | None = None) -> bool:
        check_positive("lease_s", lease_s)
        now = time.time()
        return self._update_running(
            task_id, attempt, "lease_until = %s, updated_at = %s", [now + lease_s, now]
        )

    def complete(self, task_id: str, *, attempt: int | None = None) -> bool:
        return self._update_running(
            task_id,
            attempt,
            "status = 'done', lease_until = NULL, error = NULL, updated_at = %s",
            [time.time()],
        )

    def fail(
        self,
        task_id: str,
        error: str,
        retry_in_s: float | None,
        *,
        attempt: int | None = None,
    ) -> bool:
        now = time.time()
        if retry_in_s is None:
            retry_at = None
        else:
            check_non_negative("retry_in_s", retry_in_s)
            retry_at = now + retry_in_s
        assignments = (
            "status = CASE WHEN %s::float8 IS NOT NULL AND attempts < max_attempts "
            "THEN 'pending' ELSE 'failed' END, run_after = coalesce(%s::float8, run_after), "
            "lease_until = NULL, error = %s, updated_at = %s"
        )
        params = [retry_at, retry_at, truncate_error(error), now]
        return self._update_running(task_id, attempt, assignments, params)

    def release(self, task_id: str, *, attempt: int | None = None) -> bool:
        now = time.time()
        assignments = (
            "status = 'pending', attempts = attempts - 1, run_after = %s, lease_until = NULL, "
            "updated_at = %s"
        )
        return self._update_running(task_id, attempt, assignments, [now, now])

    def get(self, task_id: str) -> Task | None:
        found = self._select(f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = %s", [task_id])
        return found[0] if found else None

    def tasks(
        self, cube_id: str | None = None, status: TaskStatus | None = None, limit: int = 100
    ) -> list[Task]:
        if status is not None and status not in TASK_STATUSES:
            raise ValidationError(
                f"unknown task status {status!r}", hint=f"use one of {', '.join(TASK_STATUSES)}"
            )
        where, params = _scope(cube_id, (status,) if status else None)
        sql = (
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE {where} "
            "ORDER BY created_at DESC, task_id DESC LIMIT %s"
        )
        return self._select(sql, [*params, limit])

    def outstanding(self, cube_id: str | None = None) -> int:
        where, params = _scope(cube_id, ("pending", "running"))
        found = self.store.row(f"SELECT count(*) FROM tasks WHERE {where}", params)
        return int(found[0]) if found else 0

    def _select(self, sql: str, params: list[Any]) -> list[Task]:
        return [task_from_row(r) for r in self.store.dict_rows(sql, params)]

    def _update_running(
        self, task_id: str, attempt: int | None, assignments: str, params: list[Any]
    ) -> bool:
        """Apply ``assignments`` to the task if it is running (under claim ``attempt``)."""
        sql = f"UPDATE tasks SET {assignments} WHERE task_id = %s AND status = 'running'"
        params = [*params, task_id]
        if attempt is not None:
            sql += " AND attempts = %s"
            params.append(attempt)
        with self.store.transaction() as conn:
            return bool(conn.execute(sql, params).rowcount == 1)


def _dict_row() -> Any:
    from psycopg.rows import dict_row

    return dict_row


def _scope(cube_id: str | None, statuses: tuple[str, ...] | None) -> tuple[str, list[Any]]:
    clauses, params = ["TRUE"], []  # type: list[str], list[Any]
    if cube_id is not None:
        clauses.append("cube_id = %s")
        params.append(cube_id)
    if statuses:
        clauses.append("status = ANY(%s)")
        params.append(list(statuses))
    return " AND ".join(clauses), params
