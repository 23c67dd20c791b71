"""What the SQL task queues share: the ``tasks`` table's statements that read a task or record an
outcome, written once for SQLite (``?``) and PostgreSQL (``%s``).

A queue of an engine subclasses ``SQLTaskQueue`` and brings what differs: ``submit`` and
``claim`` (how claimers exclude each other), its placeholder, how it matches a list of cubes, and
how it reads rows and opens a write transaction.  A row that is not a task (see ``store.queue``)
is listed as quarantined, and quarantined by the claim that takes it (``_claimed``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

from memstrata.store.queue import (
    OUTSTANDING,
    TASK_COLUMNS,
    Task,
    TaskStatus,
    UnreadableTask,
    check_non_negative,
    check_positive,
    check_status,
    in_status,
    listed_task,
    quarantine_error,
    retried,
    task_fields,
    task_from_row,
    truncate_error,
)

logger = logging.getLogger("memstrata.scheduler")


class SQLTaskQueue:
    """``TaskQueue``'s reads and outcome writes over a ``tasks`` table (see the module doc)."""

    #: the driver's parameter placeholder
    mark = "?"

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Every row of one read, each readable by column name."""
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Any]:
        """One write transaction, yielding a connection whose ``execute`` has ``rowcount``."""
        raise NotImplementedError

    def _among(self, cube_ids: list[str]) -> tuple[str, Any]:
        """A condition that ``cube_id`` is one of ``cube_ids``, with its one parameter."""
        raise NotImplementedError

    def renew(self, task_id: str, lease_s: float, *, attempt: int | None = None) -> bool:
        check_positive("lease_s", lease_s)
        now = time.time()
        m = self.mark
        return self._update_running(
            task_id, attempt, f"lease_until = {m}, updated_at = {m}", [now + lease_s, now]
        )

    def complete(self, task_id: str, *, attempt: int | None = None) -> bool:
        return self._update_running(
            task_id,
            attempt,
            f"status = 'done', lease_until = NULL, error = NULL, updated_at = {self.mark}",
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
        # Retry only while attempts remain; the queue enforces max_attempts whatever the caller asks.
        at = f"CAST({self.mark} AS DOUBLE PRECISION)"
        assignments = (
            f"status = CASE WHEN {at} IS NOT NULL AND attempts < max_attempts "
            f"THEN 'pending' ELSE 'failed' END, run_after = coalesce({at}, run_after), "
            f"lease_until = NULL, error = {self.mark}, updated_at = {self.mark}"
        )
        params = [retry_at, retry_at, truncate_error(error), now]
        return self._update_running(task_id, attempt, assignments, params)

    def release(self, task_id: str, *, attempt: int | None = None) -> bool:
        now = time.time()
        assignments = (
            f"status = 'pending', attempts = attempts - 1, run_after = {self.mark}, "
            f"lease_until = NULL, updated_at = {self.mark}"
        )
        return self._update_running(task_id, attempt, assignments, [now, now])

    def retry(self, task_id: str) -> Task:
        now = time.time()
        m = self.mark
        sql = (
            f"UPDATE tasks SET status = 'pending', max_attempts = attempts + 1, run_after = {m}, "
            f"lease_until = NULL, updated_at = {m} WHERE task_id = {m} AND status = 'failed'"
        )
        with self._transaction() as conn:
            changed = conn.execute(sql, [now, now, task_id]).rowcount == 1
        return retried(task_id, changed, self.get(task_id))

    def get(self, task_id: str) -> Task | None:
        found = self._rows(f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = {self.mark}",
                           [task_id])  # fmt: skip
        return _listed(found[0]) if found else None

    def tasks(
        self,
        cube_id: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 100,
        *,
        cube_ids: Collection[str] | None = None,
    ) -> list[Task]:
        check_status(status)
        where, params = self._scope(cube_id, (status,) if status else ())
        if cube_ids is not None:  # filtered in the query, so the LIMIT counts only their tasks
            among, members = self._among(sorted(set(cube_ids)))
            where, params = f"{where} AND {among}", [*params, members]
        sql = (
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE {where} "
            f"ORDER BY created_at DESC, task_id DESC LIMIT {self.mark}"
        )
        return in_status([_listed(r) for r in self._rows(sql, [*params, limit])], status)

    def outstanding(self, cube_id: str | None = None) -> int:
        where, params = self._scope(cube_id, OUTSTANDING)
        return int(self._rows(f"SELECT count(*) AS n FROM tasks WHERE {where}", params)[0]["n"])

    def _claimed(self, conn: Any, row: Any, now: float) -> Task | None:
        """The task of ``row``, which a claim has just taken in transaction ``conn``; ``None``
        when the row is not a task: it is quarantined instead (``failed``, the reason as its
        error), so the claim can go on to the next task."""
        try:
            return task_from_row(row)
        except UnreadableTask as exc:
            reason = exc.reason
        m = self.mark
        conn.execute(
            f"UPDATE tasks SET status = 'failed', lease_until = NULL, error = {m}, "
            f"updated_at = {m} WHERE task_id = {m}",
            [quarantine_error(reason), now, row["task_id"]],
        )
        logger.warning("task %s quarantined: its stored row is unreadable (%s)",
                       row["task_id"], reason)  # fmt: skip
        return None

    def _update_running(
        self, task_id: str, attempt: int | None, assignments: str, params: list[Any]
    ) -> bool:
        """Apply ``assignments`` to the task if it is running (under claim ``attempt``)."""
        sql = f"UPDATE tasks SET {assignments} WHERE task_id = {self.mark} AND status = 'running'"
        params = [*params, task_id]
        if attempt is not None:
            sql += f" AND attempts = {self.mark}"
            params.append(attempt)
        with self._transaction() as conn:
            return bool(conn.execute(sql, params).rowcount == 1)

    def _scope(self, cube_id: str | None, statuses: Sequence[str]) -> tuple[str, list[Any]]:
        clauses, params = ["1 = 1"], list[Any]()
        if cube_id is not None:
            clauses.append(f"cube_id = {self.mark}")
            params.append(cube_id)
        if statuses:
            clauses.append(f"status IN ({', '.join([self.mark] * len(statuses))})")
            params.extend(statuses)
        return " AND ".join(clauses), params


def _listed(row: Any) -> Task:
    """A row as a listing shows it (``listed_task``: an unreadable row marked, never raised)."""
    return listed_task(str(row["task_id"]), task_fields(row))
