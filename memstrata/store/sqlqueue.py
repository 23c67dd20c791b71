"""What the SQL task queues share: the ``tasks`` table's statements that submit, read a task,
claim one or record an outcome, written once over the store's ``Dialect`` (``store/sql/``) for
SQLite and PostgreSQL.

A queue of an engine subclasses ``SQLTaskQueue`` and brings only what differs: how a claim finds
and takes its task so that no two claimers get the same one (``_expire``, ``_take``).  A
submitter of a dedupe key queues on the dialect's lock for it (PostgreSQL's advisory lock;
nothing under SQLite's one writer).  A row that is not a task (see ``store.queue``) is listed as
quarantined, and quarantined by the claim that takes it (``_claimed``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

from memstrata.model import new_id
from memstrata.store.queue import (
    MAX_QUARANTINED_PER_CLAIM,
    OUTSTANDING,
    TASK_COLUMNS,
    Task,
    TaskStatus,
    UnreadableTask,
    check_non_negative,
    check_positive,
    check_status,
    checked_submit,
    in_status,
    listed_task,
    quarantine_error,
    retried,
    task_fields,
    task_from_row,
    truncate_error,
)
from memstrata.store.sql.database import SQLDatabase

logger = logging.getLogger("memstrata.scheduler")
#: The key space of ``Dialect.lock`` for dedupe keys (external ids are 0).
DEDUPE_LOCKS = 1


class SQLTaskQueue:
    """``TaskQueue`` over a ``tasks`` table (see the module doc) but how a claim takes a task."""

    def __init__(self, store: SQLDatabase) -> None:
        self.store = store
        self.mark = store.dialect.mark

    def _take(self, conn: Any, now: float, lease_until: float, skip: list[str]) -> Any:
        """Claim the first due task in transaction ``conn`` (expired leases first, then pending
        tasks due longest ago), as running until ``lease_until``: its row (readable by column
        name), or ``None`` when none is due.  ``skip``: the caller's own running tasks."""
        raise NotImplementedError

    def _expire(self, conn: Any, now: float, skip: list[str]) -> None:
        """Fail the expired leases that have no attempt left (their worker is gone)."""
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Every row of one read, each readable by column name."""
        return self.store.dicts(sql, params)

    def _transaction(self) -> AbstractContextManager[Any]:
        """One write transaction, yielding a connection whose ``execute`` has ``rowcount``."""
        return self.store.transaction()

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
        m = self.mark
        with self._transaction() as conn:
            if dedupe_key is not None:
                held = self._take_key(conn, dedupe_key)
                if held is not None:
                    return held
            task_id = new_id()
            conn.execute(
                f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ({m}, {m}, {m}, {m}, 'pending', 0, "
                f"{m}, {m}, NULL, NULL, {m}, {m}, {m})",
                (task_id, kind, cube_id, body, max_attempts, now + delay_s, now, now, dedupe_key),
            )
        return task_id

    def claim(self, lease_s: float, *, skip: Collection[str] = ()) -> Task | None:
        check_positive("lease_s", lease_s)
        now = time.time()
        skipped = list(skip)
        with self._transaction() as conn:
            self._expire(conn, now, skipped)
            # A row that is not a task is quarantined and the claim goes on to the next one.
            for _ in range(MAX_QUARANTINED_PER_CLAIM + 1):
                row = self._take(conn, now, now + lease_s, skipped)
                if row is None:
                    return None
                task = self._claimed(conn, row, now)
                if task is not None:
                    return task
        return None

    def _take_key(self, conn: Any, dedupe_key: str) -> str | None:
        """The id of the pending task holding ``dedupe_key``; else free the key from its old
        holder.

        A running task gives its key up: what is submitted while it runs may depend on data it
        has already read, so it must run again after it (a follow-up), not be folded into it.
        Submitters of one key queue on its lock, so the key's holder is read once.
        """
        m = self.mark
        self.store.dialect.lock(conn, dedupe_key, DEDUPE_LOCKS)
        held = conn.execute(
            f"SELECT task_id, status FROM tasks WHERE dedupe_key = {m}", (dedupe_key,)
        ).fetchone()
        if held is None:
            return None
        if held[1] == "pending":
            return str(held[0])
        conn.execute(f"UPDATE tasks SET dedupe_key = NULL WHERE task_id = {m}", (held[0],))
        return None

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
            among, members = self.store.dialect.among("cube_id", sorted(set(cube_ids)))
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
