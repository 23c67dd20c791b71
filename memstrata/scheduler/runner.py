"""``Scheduler``: runs a ``TaskQueue``'s tasks with registered handlers, in worker threads or inline.

A worker claims a task, runs its kind's handler with the lease kept alive by a heartbeat, then
records the outcome: ``complete``, or ``fail`` with a retry after exponential backoff until the
task's attempts are used up.  Only the outcome is written, in one statement, so a task is never
half-marked: a process that dies leaves the task ``running`` under a lease that expires, and the
next claim runs it again; a ``close`` that gives up waiting on a handler releases its task
(pending again, the attempt not counted).  Handlers must therefore be idempotent (see
``docs/scheduler.md``).

Logging (``memstrata.scheduler``): a failed attempt that raised a ``MemstrataError`` (an expected
failure: a conflict with a concurrent write, an endpoint down) is one line, at INFO for a
``ConflictError``, else WARNING; any other exception is a bug and is logged with its traceback.
A task that fails for good is one ERROR line.  A worker whose claims (or outcome writes) keep
failing (the queue's database or Redis unreachable) backs off, its pause doubling from ``poll_s``
up to ``MAX_ERROR_PAUSE_S``, and logs the first failure with its traceback, then one line at the
2nd, 4th, 8th … failure in a row: never a traceback per poll.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from memstrata.closing import Closing
from memstrata.errors import ConfigurationError, ConflictError, MemstrataError
from memstrata.scheduler.heartbeat import Heartbeat
from memstrata.store.queue import Task, TaskQueue

logger = logging.getLogger("memstrata.scheduler")

#: A task handler: does the work of one task; raising any ``Exception`` fails this attempt.
Handler = Callable[[Task], None]
#: The longest pause, in seconds, of a worker whose claims keep failing (see the module doc).
MAX_ERROR_PAUSE_S = 30.0


def describe(exc: BaseException) -> str:
    """The error text kept in a task row: ``"ExceptionType: message"``, never a traceback."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class Scheduler(Closing):
    """Runs tasks of ``queue`` with the handlers registered per kind.

    ``workers`` threads claim tasks once ``start()`` is called; ``workers=0`` is inline mode:
    ``submit``, ``retry`` and ``wait`` run due tasks in the caller's thread (for scripts and
    tests), unless ``queue_only``: then this scheduler runs nothing and only queues, leaving the
    tasks to other processes' schedulers (``memstrata worker``; a server with ``--workers 0``).
    A lease lasts ``lease_s`` seconds and is renewed every third of it while a handler runs.  A
    failed attempt ``n`` is retried after ``backoff_s · 2^(n-1)`` seconds, at most
    ``max_backoff_s``.  Idle workers look for due tasks every ``poll_s`` seconds (``submit`` and
    ``retry`` wake them at once).

    Thread-safe.  Worker threads are daemons, so a forgotten ``close()`` does not hang the
    interpreter's exit (their tasks are simply re-claimed later); ``close()`` is the clean stop.
    """

    def __init__(
        self,
        queue: TaskQueue,
        *,
        workers: int,
        lease_s: float = 30.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 300.0,
        poll_s: float = 0.2,
        queue_only: bool = False,
    ) -> None:
        _check_settings(workers, lease_s, backoff_s, max_backoff_s, poll_s)
        self.queue = queue
        self.workers = workers
        #: whether due tasks run in the calling thread (inline mode)
        self.inline = workers == 0 and not queue_only
        self.lease_s = lease_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.poll_s = poll_s
        self._handlers: dict[str, Handler] = {}
        self._threads: list[threading.Thread] = []
        self._heartbeat = Heartbeat(queue, lease_s)
        self._work_ready = threading.Condition()  # submit → idle workers
        self._progress = threading.Condition()  # a task finished → wait()
        self._closing = threading.Event()  # no new claims
        self._closed = False  # no more writes: the store may be closed next
        # Claims this scheduler holds, and the lock under which a claim is taken, its outcome
        # written, or (at close) it is released: after close no outcome of ours is written.
        self._claims: dict[str, Task] = {}
        self._outcomes = threading.Lock()
        self._inline = threading.local()
        self._dues: list[float] = []  # monotonic times our retries / delayed tasks fall due
        self._dues_lock = threading.Lock()

    # -- public ------------------------------------------------------------------------------

    def register(self, kind: str, handler: Handler) -> None:
        """Run ``handler`` for tasks of ``kind``; one handler per kind (``ConfigurationError``)."""
        if kind in self._handlers:
            raise ConfigurationError(f"a handler for task kind {kind!r} is already registered")
        self._handlers[kind] = handler

    @property
    def kinds(self) -> list[str]:
        """The task kinds a handler is registered for, sorted."""
        return sorted(self._handlers)

    def start(self) -> None:
        """Start the worker threads (idempotent; nothing to start in inline mode)."""
        if self._closing.is_set():
            raise ConfigurationError("this scheduler is closed", hint="create a new Scheduler")
        if self.workers == 0 or self._threads:
            return
        for number in range(self.workers):
            thread = threading.Thread(
                target=self._work, name=f"memstrata-worker-{number}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

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
        """``TaskQueue.submit``, then wake a worker; the task is durable when this returns.

        In inline mode the due tasks (this one included, unless delayed or deduplicated onto a
        running one) are run before returning; their failures are recorded and retried later,
        never raised.  Called from inside a handler, it only queues: the running drain picks the
        new task up next.  After ``close()`` it only queues.  In inline mode call it outside a
        store transaction, or the tasks would run inside the caller's transaction.
        """
        task_id = self.queue.submit(
            kind, payload, cube_id=cube_id, dedupe_key=dedupe_key,
            max_attempts=max_attempts, delay_s=delay_s,
        )  # fmt: skip
        self._expect(delay_s)
        self._wake()
        return task_id

    def retry(self, task_id: str) -> Task:
        """``TaskQueue.retry`` (a failed task gets one more attempt, due now), then wake a worker
        as ``submit`` does; in inline mode the due tasks, this one included, are run first.

        Returns the task as it stands then (``done`` or ``failed`` again in inline mode).
        Raises what ``TaskQueue.retry`` raises: ``TaskNotFound``, ``TaskNotFailed``.
        """
        retried = self.queue.retry(task_id)
        self._wake()
        return self.queue.get(task_id) or retried

    def wait(self, cube_id: str | None = None, timeout: float | None = None) -> bool:
        """Block until no task (of ``cube_id``, when given) is pending or running.

        True when that holds, False once ``timeout`` seconds have passed (``None``: no limit).
        Tasks that end ``failed`` count as finished.  In inline mode the due tasks are run here,
        sleeping in between until the next retry or delayed task this scheduler knows of is due
        (at most ``poll_s``: other processes' tasks are seen by polling).  Do not call it from a
        handler: the handler's own task is outstanding.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.inline:
                self._drain()
            if self.queue.outstanding(cube_id) == 0:
                return True
            pause = self._pause(deadline)
            if pause <= 0:
                return False
            with self._progress:
                self._progress.wait(pause)

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop claiming, let running handlers finish for up to ``timeout`` seconds, and stop.

        A task whose handler is still running then is released: ``pending`` again and due at
        once, the attempt not counted, so the next scheduler on this database runs it from the
        start; the abandoned handler's outcome is not recorded.  Idempotent; never raises for a
        task it could not release (that one runs again once its lease expires).
        """
        if self._closing.is_set():
            return
        self._closing.set()
        with self._work_ready:
            self._work_ready.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        with self._outcomes:
            self._closed = True
            unfinished = list(self._claims.values())
            self._claims.clear()
        self._heartbeat.stop()
        for task in unfinished:
            self._release(task)

    def retry_delay(self, attempts: int) -> float:
        """Seconds before retrying after failed attempt number ``attempts`` (1 = the first)."""
        # The exponent is capped so a huge attempt count cannot overflow a float.
        return min(self.max_backoff_s, self.backoff_s * 2.0 ** min(attempts - 1, 60))

    # -- running tasks -----------------------------------------------------------------------

    def _wake(self) -> None:
        """A task is due now: run it here (inline mode) or wake an idle worker thread."""
        if self.inline:
            self._drain()
        else:
            with self._work_ready:
                self._work_ready.notify()

    def _work(self) -> None:
        failures = 0  # claims or outcome writes failed in a row
        while not self._closing.is_set():
            try:
                ran = self._run_one()
                failures = 0
            except Exception as exc:
                # The worker loop's edge: a database error (locked past the busy timeout, disk
                # full, Redis gone) must not kill the worker; it is logged and the claim retried
                # after a pause that grows while the failures go on, so they cannot flood the log.
                failures += 1
                _log_worker_failure(failures, exc, self._idle_pause(failures))
                ran = False
            if not ran:
                with self._work_ready:
                    if not self._closing.is_set():
                        self._work_ready.wait(self._idle_pause(failures))

    def _idle_pause(self, failures: int) -> float:
        """How long an idle worker waits: ``poll_s``, doubled per failure in a row (at most
        ``MAX_ERROR_PAUSE_S``, and never below ``poll_s``)."""
        if failures == 0:
            return self.poll_s
        return max(self.poll_s, min(MAX_ERROR_PAUSE_S, self.poll_s * 2.0 ** min(failures, 30)))

    def _drain(self) -> None:
        """Inline mode: run due tasks until none is left (not re-entered from a handler)."""
        if getattr(self._inline, "draining", False):
            return
        self._inline.draining = True
        try:
            while not self._closing.is_set() and self._run_one():
                pass
        finally:
            self._inline.draining = False

    def _run_one(self) -> bool:
        """Claim and run one task; False when none was due."""
        task = self._claim()
        if task is None:
            return False
        handler = self._handlers.get(task.kind)
        if handler is None:
            unknown = ConfigurationError(
                f"no handler registered for task kind {task.kind!r}",
                hint="register one with Scheduler.register(kind, handler)",
            )
            self._finish(task, unknown, retry_in_s=None)
            return True
        with self._heartbeat.hold(task):
            failure = _call(handler, task)
        if failure is None or task.attempts >= task.max_attempts:
            self._finish(task, failure, retry_in_s=None)
        else:
            self._finish(task, failure, retry_in_s=self.retry_delay(task.attempts))
        return True

    def _claim(self) -> Task | None:
        """Claim a due task unless closing; our own running tasks are never re-claimed here,
        however late their heartbeat (the queue's ``skip``)."""
        with self._outcomes:
            if self._closing.is_set():
                return None
            task = self.queue.claim(self.lease_s, skip=tuple(self._claims))
            if task is not None:
                self._claims[task.task_id] = task
        return task

    def _finish(self, task: Task, failure: Exception | None, *, retry_in_s: float | None) -> None:
        """Write the outcome of ``task``'s claim, unless ``close`` has released it meanwhile."""
        error = None if failure is None else describe(failure)
        kept = False
        with self._outcomes:
            released = self._closed
            if not released:
                self._claims.pop(task.task_id, None)  # even if the write fails: the lease runs out
                if error is None:
                    kept = self.queue.complete(task.task_id, attempt=task.attempts)
                else:
                    kept = self.queue.fail(task.task_id, error, retry_in_s, attempt=task.attempts)
        if released:
            _log_after_close(task, error)
        elif not kept:
            logger.warning(
                "task %s lost its claim (attempt %d) before finishing; its outcome is dropped",
                task.task_id,
                task.attempts,
            )
        elif failure is not None:
            _log_failure(task, failure, retry_in_s)
            self._expect(retry_in_s or 0.0)
        with self._progress:
            self._progress.notify_all()

    def _release(self, task: Task) -> None:
        """Give ``task`` back at close, unfinished; a failure to do so is logged, not raised."""
        try:
            released = self.queue.release(task.task_id, attempt=task.attempts)
        except MemstrataError as exc:
            logger.warning(
                "could not release task %s (%s) at close: %s; it runs again once its lease "
                "expires", task.task_id, task.kind, exc,
            )  # fmt: skip
            return
        if released:
            logger.info(
                "task %s (%s) was still running at close: released, it runs again on the next "
                "start", task.task_id, task.kind,
            )  # fmt: skip

    def _expect(self, delay_s: float) -> None:
        """Note that a task of ours becomes due in ``delay_s`` seconds (so ``wait`` wakes then)."""
        if delay_s > 0:
            with self._dues_lock:
                heapq.heappush(self._dues, time.monotonic() + delay_s)

    def _pause(self, deadline: float | None) -> float:
        """How long ``wait`` sleeps: until the next known due time, ``poll_s`` or the deadline."""
        now = time.monotonic()
        pause = self.poll_s if deadline is None else min(self.poll_s, deadline - now)
        with self._dues_lock:
            while self._dues and self._dues[0] <= now:
                heapq.heappop(self._dues)
            if self._dues:
                pause = min(pause, self._dues[0] - now)
        return pause


def _call(handler: Handler, task: Task) -> Exception | None:
    """Run ``handler`` on ``task``; the exception it raised, or None."""
    try:
        handler(task)
    except Exception as exc:
        # The handler's edge: any failure of task code is this attempt's outcome.
        # BaseException (KeyboardInterrupt, SystemExit) passes: the task stays running under its
        # lease and is re-claimed, exactly as if the process had died.
        return exc
    return None


def _log_failure(task: Task, failure: Exception, retry_in_s: float | None) -> None:
    """One line for an expected failure (a ``MemstrataError``), a traceback for any other."""
    expected = isinstance(failure, MemstrataError)
    trace = None if expected else failure
    if retry_in_s is None:
        logger.error(
            "task %s (%s) failed for good after %d attempt(s): %s",
            task.task_id, task.kind, task.attempts, describe(failure), exc_info=trace,
        )  # fmt: skip
        return
    level = logging.INFO if isinstance(failure, ConflictError) else logging.WARNING
    logger.log(
        level,
        "task %s (%s) attempt %d/%d failed, retried in %g s: %s",
        task.task_id, task.kind, task.attempts, task.max_attempts, retry_in_s, describe(failure),
        exc_info=trace,
    )  # fmt: skip


def _log_worker_failure(failures: int, exc: Exception, pause: float) -> None:
    """A worker's failure to claim or record, number ``failures`` in a row: the first with its
    traceback, then one line at each power of two, nothing in between."""
    if failures == 1:
        logger.error("scheduler worker failed to claim or record a task", exc_info=exc)
    elif failures & (failures - 1) == 0:
        logger.error(
            "scheduler worker failed to claim or record a task %d times in a row (%s); "
            "trying again every %g s", failures, describe(exc), pause,
        )  # fmt: skip


def _log_after_close(task: Task, error: str | None) -> None:
    """The end of a handler that ``close`` gave up on (its task was released): one line."""
    ending = "finished" if error is None else f"stopped ({error})"
    logger.info(
        "task %s (%s) %s after the scheduler closed; it was released and runs again",
        task.task_id, task.kind, ending,
    )  # fmt: skip


def _check_settings(
    workers: int, lease_s: float, backoff_s: float, max_backoff_s: float, poll_s: float
) -> None:
    checks = [
        ("workers", workers, workers >= 0, "0 (inline) or more"),
        ("lease_s", lease_s, lease_s > 0, "more than 0 seconds"),
        ("backoff_s", backoff_s, backoff_s >= 0, "0 seconds or more"),
        ("max_backoff_s", max_backoff_s, max_backoff_s >= backoff_s, "at least backoff_s"),
        ("poll_s", poll_s, poll_s > 0, "more than 0 seconds"),
    ]
    for name, value, ok, allowed in checks:
        if not ok or not math.isfinite(value):
            raise ConfigurationError(
                f"scheduler setting {name}={value!r} is out of range", hint=f"allowed: {allowed}"
            )
