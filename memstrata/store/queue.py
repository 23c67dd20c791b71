"""The scheduler's durable task queue: the ``Task`` row and the ``TaskQueue`` Protocol (DESIGN §8).

A task is a unit of background work (consolidate a segment, promote, re-embed, …) stored as a row,
so a crash loses none.  Its life::

    pending ──claim──► running ──complete──► done
       ▲                  │ │
       ├──fail(retry_in)──┘ └──fail(None) or attempts exhausted──► failed
       └───retry (one more attempt)──────────────────────────────────┘
       (a running task whose lease expired is claimable again: the worker that held it is gone)

Times are UTC ``datetime`` objects in the model and wall-clock seconds in the store, so processes
sharing a database must share a clock (they share a machine or NTP).  Durations (``lease_s``,
``delay_s``, ``retry_in_s``) are seconds.

Claims are fenced by the attempt number: ``claim`` returns the task with ``attempts`` already
incremented, and ``renew``/``complete``/``fail``/``release`` given ``attempt=task.attempts`` act only
while that claim is still the current one, so a worker whose lease expired and was re-claimed
elsewhere cannot finish or fail the new run.  ``release`` gives the attempt back (the next claim
has the same number), so a caller that releases a claim must not use it again.  ``retry`` never
resets ``attempts`` (it raises ``max_attempts`` instead), so claim numbers only grow and a worker
that lost a claim long ago cannot finish a later run that reached the same number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from memstrata.errors import TaskNotFailed, TaskNotFound, ValidationError
from memstrata.model import from_epoch
from memstrata.store import rows

TaskStatus = Literal["pending", "running", "done", "failed"]
TASK_STATUSES: tuple[str, ...] = get_args(TaskStatus)
#: Statuses that still have work to do; ``outstanding`` counts these.
OUTSTANDING: tuple[TaskStatus, ...] = ("pending", "running")
#: The longest error text kept in a task row (longer ones are truncated with a marker).
MAX_ERROR_CHARS = 4000
#: The error ``claim`` records on an expired task whose attempts are used up.
LOST_WORKER = (
    "LeaseExpired: the worker running the last attempt stopped (killed or hung) before finishing"
)


@dataclass(frozen=True)
class Task:
    """One stored task, as read at one moment (a snapshot: the row may have moved on since).

    ``attempts`` counts the claims so far (the current one included while ``running``);
    ``error`` is the last failure as ``"ExceptionType: message"`` (cleared when the task is done);
    ``lease_until`` is set only while ``running``; ``dedupe_key`` is ``None`` once a later task
    with the same key has taken it over.
    """

    task_id: str
    kind: str
    cube_id: str | None
    payload: dict[str, Any] = field(hash=False)
    status: TaskStatus
    attempts: int
    max_attempts: int
    run_after: datetime
    lease_until: datetime | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    dedupe_key: str | None = None


@runtime_checkable
class TaskQueue(Protocol):
    """A durable queue of tasks.  Every method is atomic and safe to call from any thread, and
    (for a shared database) from several processes at once.  Every write is durable on return."""

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
        """Store a new ``pending`` task due in ``delay_s`` seconds and return its id.

        ``payload`` must be JSON-serialisable (``ValidationError`` otherwise).  When a ``pending``
        task holds ``dedupe_key``, nothing is stored and that task's id is returned (this call's
        payload is dropped); a task that is running or finished frees its key, so a submit made
        while a task runs queues a follow-up.  The key is global, so callers put the cube id in it.
        """
        ...

    def claim(self, lease_s: float, *, skip: Collection[str] = ()) -> Task | None:
        """Atomically take one due task, or ``None`` when none is due.

        The candidates are ``running`` tasks whose lease has expired (their worker died; these go
        first) and ``pending`` tasks whose ``run_after`` has passed (oldest ``run_after`` first).
        The claimed task becomes ``running`` with ``attempts + 1`` and a lease of ``lease_s``
        seconds.  An expired task that has used all its attempts is marked ``failed`` instead, so
        a task that kills its worker every time cannot loop forever.  Two callers never get the
        same claim.  ``skip`` names tasks the caller is running itself: it knows they are alive,
        so they are neither taken nor failed when their lease has run out (a late heartbeat).
        """
        ...

    def renew(self, task_id: str, lease_s: float, *, attempt: int | None = None) -> bool:
        """Extend a running task's lease to ``lease_s`` seconds from now (a heartbeat).

        False when the task is no longer running (under claim ``attempt``, when given).
        """
        ...

    def complete(self, task_id: str, *, attempt: int | None = None) -> bool:
        """Mark a running task ``done`` (clearing its lease and error).

        False, and nothing changed, when it is not running (under claim ``attempt``, when given);
        so repeating it is harmless.
        """
        ...

    def fail(
        self,
        task_id: str,
        error: str,
        retry_in_s: float | None,
        *,
        attempt: int | None = None,
    ) -> bool:
        """Record a failed run of a running task; ``error`` is kept (truncated to ``MAX_ERROR_CHARS``).

        With ``retry_in_s`` and attempts left, the task goes back to ``pending``, due in that many
        seconds; otherwise it is ``failed`` for good.  False, and nothing changed, when it is not
        running (under claim ``attempt``, when given).
        """
        ...

    def release(self, task_id: str, *, attempt: int | None = None) -> bool:
        """Give a running task back unfinished (its worker is stopping): ``pending`` again, due now,
        its lease cleared, its last error kept, and this claim not counted as an attempt.

        False, and nothing changed, when it is not running (under claim ``attempt``, when given).
        """
        ...

    def retry(self, task_id: str) -> Task:
        """Give a ``failed`` task one more attempt: ``pending`` again and due now; the task as it
        stands just after (a worker may have claimed it already).

        ``attempts`` is kept, not reset: it is the history of the runs and the fence of their
        claims (see the module doc), so ``max_attempts`` becomes ``attempts + 1``; a run that
        fails again is ``failed`` at once, without a backoff retry.  The last ``error`` is kept
        until the task is done, as for a task waiting for a backoff retry.  The payload, kind,
        cube and dedupe key are unchanged (a task still holding its key holds it again, as a
        pending task).  ``TaskNotFound`` for an unknown id; ``TaskNotFailed`` (a
        ``ConflictError``), and nothing changed, when the task is not ``failed``.
        """
        ...

    def get(self, task_id: str) -> Task | None:
        """The task, or ``None`` when there is no such id."""
        ...

    def tasks(
        self, cube_id: str | None = None, status: TaskStatus | None = None, limit: int = 100
    ) -> list[Task]:
        """Up to ``limit`` tasks (of one cube / in one status, when given), newest first."""
        ...

    def outstanding(self, cube_id: str | None = None) -> int:
        """How many tasks (of one cube, when given) are ``pending`` or ``running``."""
        ...


# -- the rules every queue applies alike ------------------------------------------------------


def truncate_error(error: str) -> str:
    """``error`` cut to ``MAX_ERROR_CHARS``, marking the cut."""
    if len(error) <= MAX_ERROR_CHARS:
        return error
    marker = " … [truncated]"
    return error[: MAX_ERROR_CHARS - len(marker)] + marker


def retried(task_id: str, changed: bool, now: Task | None) -> Task:
    """``retry``'s answer, given whether its write changed the task and the task read after it:
    the task, or ``TaskNotFound`` / ``TaskNotFailed``."""
    if now is None:
        raise TaskNotFound(task_id)
    if not changed:
        raise TaskNotFailed(task_id, now.status)
    return now


def checked_submit(kind: str, payload: dict[str, Any], max_attempts: int, delay_s: float) -> str:
    """Validate a submission (``ValidationError``); return the payload as JSON."""
    if not kind or not kind.strip():
        raise ValidationError("a task needs a kind", hint="e.g. 'promote' or 'summarise'")
    if max_attempts < 1:
        raise ValidationError(f"max_attempts must be at least 1, not {max_attempts}")
    check_non_negative("delay_s", delay_s)
    try:
        return rows.dumps(payload)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"task payload is not JSON-serialisable: {exc}",
            hint="pass ids and plain values, not objects",
        ) from exc


def check_status(status: str | None) -> None:
    """``ValidationError`` unless ``status`` is ``None`` or one of ``TASK_STATUSES``."""
    if status is not None and status not in TASK_STATUSES:
        raise ValidationError(
            f"unknown task status {status!r}", hint=f"use one of {', '.join(TASK_STATUSES)}"
        )


def check_positive(name: str, value: float) -> None:
    """``ValidationError`` unless ``value`` is a finite number of seconds above zero."""
    if not (math.isfinite(value) and value > 0):
        raise ValidationError(f"{name} must be a positive number of seconds, not {value!r}")


def check_non_negative(name: str, value: float) -> None:
    """``ValidationError`` unless ``value`` is a finite number of seconds, zero or more."""
    if not (math.isfinite(value) and value >= 0):
        raise ValidationError(f"{name} must be zero or more seconds, not {value!r}")


#: A task row's columns, in the order both engines' SQL lists them.
TASK_COLUMNS = (
    "task_id, kind, cube_id, payload, status, attempts, max_attempts, run_after, lease_until, "
    "error, created_at, updated_at, dedupe_key"
)


def task_from_row(row: Any) -> Task:
    """A ``Task`` from a row of ``TASK_COLUMNS`` read by name (``sqlite3.Row`` or a dict)."""
    return Task(
        task_id=row["task_id"],
        kind=row["kind"],
        cube_id=row["cube_id"],
        payload=json.loads(row["payload"]),
        status=row["status"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        run_after=rows.to_datetime(row["run_after"]),
        lease_until=from_epoch(row["lease_until"]),
        error=row["error"],
        created_at=rows.to_datetime(row["created_at"]),
        updated_at=rows.to_datetime(row["updated_at"]),
        dedupe_key=row["dedupe_key"],
    )
