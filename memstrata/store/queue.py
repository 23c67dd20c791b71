"""The scheduler's durable task queue: the ``Task`` row and the ``TaskQueue`` Protocol.

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

A stored task that cannot be read back (a field of the wrong type, a payload that is not a JSON
object: written by hand into the database or into Redis, or by a bug) never stops the queue: a
claim that meets one **quarantines** it (``failed``, its ``error`` ``"Quarantined: <what is
wrong>"``, off the ready set) and goes on to the next task, and a listing shows it as such a
failed task, with what could be read of it (``read_task``, ``listed_task``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Protocol, cast, get_args, runtime_checkable

from memstrata.errors import TaskNotFailed, TaskNotFound, ValidationError
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
#: The head of the error of a task quarantined because its stored record could not be read.
QUARANTINED = "Quarantined"
#: Most unreadable tasks one ``claim`` quarantines before it returns ``None`` for this call (the
#: next claim goes on): a claim's work is bounded however many poisoned records there are.
MAX_QUARANTINED_PER_CLAIM = 100


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
        self,
        cube_id: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 100,
        *,
        cube_ids: Collection[str] | None = None,
    ) -> list[Task]:
        """Up to ``limit`` tasks (of one cube / in one status, when given), newest first.

        ``cube_ids`` narrows the listing to tasks of those cubes (none when it is empty) before
        the limit applies, so a caller sees its own newest tasks however many others there are.
        A task whose stored record cannot be read is listed as ``listed_task`` shows it (failed,
        quarantined), never raised.
        """
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


def scoped_cubes(cube_id: str | None, cube_ids: Collection[str] | None) -> list[str] | None:
    """The cubes a listing is narrowed to, given ``tasks``' ``cube_id`` and ``cube_ids``: ``None``
    for every cube, else the list (empty when the two exclude each other)."""
    if cube_ids is None:
        return None if cube_id is None else [cube_id]
    return sorted({c for c in cube_ids if cube_id is None or c == cube_id})


#: A task row's columns, in the order both engines' SQL lists them.
TASK_COLUMNS = (
    "task_id, kind, cube_id, payload, status, attempts, max_attempts, run_after, lease_until, "
    "error, created_at, updated_at, dedupe_key"
)


class UnreadableTask(ValueError):
    """A stored task record that is not a task: ``reason`` says which field, never its value
    (the value may be anything at all, and the reason is shown to users)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def quarantine_error(reason: str) -> str:
    """The ``error`` a quarantined task is given."""
    return truncate_error(f"{QUARANTINED}: {reason}")


_COLUMN_NAMES = tuple(name.strip() for name in TASK_COLUMNS.split(","))


def task_fields(row: Any) -> dict[str, Any]:
    """A row of ``TASK_COLUMNS`` read by name (``sqlite3.Row`` or a dict) as ``read_task``'s
    fields."""
    return {name: row[name] for name in _COLUMN_NAMES}


def task_from_row(row: Any) -> Task:
    """A ``Task`` from a row of ``TASK_COLUMNS``: ``read_task`` (``UnreadableTask`` when the row
    is not one)."""
    return read_task(task_fields(row))


def read_task(fields: Mapping[str, Any]) -> Task:
    """A ``Task`` from a stored record, every field checked: ``UnreadableTask`` naming the first
    field that is missing or of the wrong type.

    ``fields`` maps ``Task``'s names to the stored values: SQL values, or Redis's strings (a
    number may be a numeric string; an absent optional field is missing or ``None``).  The
    payload must be a JSON object.
    """
    lease_until = fields.get("lease_until")
    return Task(
        task_id=_line(fields, "task_id"),
        kind=_line(fields, "kind"),
        cube_id=_optional_text(fields, "cube_id"),
        payload=_payload(fields.get("payload")),
        status=_status(fields.get("status")),
        attempts=_integer(fields, "attempts"),
        max_attempts=_integer(fields, "max_attempts"),
        run_after=_time(fields, "run_after"),
        lease_until=None if lease_until is None else _time(fields, "lease_until"),
        error=_optional_text(fields, "error"),
        created_at=_time(fields, "created_at"),
        updated_at=_time(fields, "updated_at"),
        dedupe_key=_optional_text(fields, "dedupe_key"),
    )


def listed_task(task_id: str, fields: Mapping[str, Any]) -> Task:
    """What a listing (or ``get``) shows of the stored record of ``task_id``: ``read_task``, or,
    when that fails, the task marked quarantined: ``failed``, its ``error`` the reason, its
    payload empty, and each other field as stored where it is readable, a neutral value (zero,
    the epoch, ``None``) where it is not.  Never raises."""
    try:
        task = read_task(fields)
        if task.task_id == task_id:
            return task
        reason = "task_id does not match its key"
    except UnreadableTask as exc:
        reason = exc.reason
    epoch = datetime.fromtimestamp(0, timezone.utc)
    return Task(
        task_id=task_id,
        kind=_or(lambda: _line(fields, "kind"), "unknown"),
        cube_id=_or(lambda: _optional_text(fields, "cube_id"), None),
        payload={},
        status="failed",
        attempts=_or(lambda: _integer(fields, "attempts"), 0),
        max_attempts=_or(lambda: _integer(fields, "max_attempts"), 0),
        run_after=_or(lambda: _time(fields, "run_after"), epoch),
        lease_until=None,
        error=quarantine_error(reason),
        created_at=_or(lambda: _time(fields, "created_at"), epoch),
        updated_at=_or(lambda: _time(fields, "updated_at"), epoch),
        dedupe_key=None,
    )


def in_status(found: list[Task], status: TaskStatus | None) -> list[Task]:
    """A listing of ``status``: ``found`` less the unreadable records ``listed_task`` shows as
    ``failed`` whose stored status is another (they are listed as failed once quarantined)."""
    return found if status is None else [t for t in found if t.status == status]


# -- reading one stored field (each raises UnreadableTask) -----------------------------------

_INTEGER = re.compile(r"-?[0-9]{1,18}")


def _or(read: Any, default: Any) -> Any:
    try:
        return read()
    except UnreadableTask:
        return default


def _line(fields: Mapping[str, Any], name: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value:
        raise UnreadableTask(f"{name} is missing or not a string")
    return value


def _optional_text(fields: Mapping[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise UnreadableTask(f"{name} is not a string")
    return value


def _payload(value: Any) -> dict[str, Any]:
    if not isinstance(value, str):
        raise UnreadableTask("payload is missing or not a string")
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than Python reads
        raise UnreadableTask("payload is not valid JSON") from exc
    if not isinstance(decoded, dict):
        raise UnreadableTask("payload is not a JSON object")
    return cast(dict[str, Any], decoded)


def _status(value: Any) -> TaskStatus:
    if value not in TASK_STATUSES:
        raise UnreadableTask("status is not a task status")
    return cast(TaskStatus, value)


def _integer(fields: Mapping[str, Any], name: str) -> int:
    value = fields.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    raise UnreadableTask(f"{name} is not an integer")


def _time(fields: Mapping[str, Any], name: str) -> datetime:
    """A time stored as epoch seconds (a number, or a numeric string from Redis)."""
    value = fields.get(name)
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(name)
        return rows.to_datetime(float(value))
    except (TypeError, ValueError, OverflowError, OSError) as exc:  # not a time, or out of range
        raise UnreadableTask(f"{name} is not a time") from exc
