"""``Scheduler``: runs a ``TaskQueue``'s tasks with registered handlers, in worker threads or inline.

A worker claims a task, runs its kind's handler with the lease kept alive by a heartbeat, then
records the outcome: ``complete``, or ``fail`` with a retry after exponential backoff until the
task's attempts are used up.  Only the outcome is written, in one statement, so a task is never
half-marked: a process that dies (or a ``close`` that gives up on a handler) leaves the task
``running`` under a lease that expires, and the next claim runs it again.  Handlers must therefore
be idempotent (see ``docs/scheduler.md``).
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
from memstrata.errors import ConfigurationError
from memstrata.scheduler.heartbeat import Heartbeat
from memstrata.store.queue import Task, TaskQueue

logger = logging.getLogger("memstrata.scheduler")

#: A task handler: does the work of one task; raising any ``Exception`` fails this attempt.
Handler = Callable[[Task], None]


def describe(exc: BaseException) -> str:
    """The error text kept in a task row: ``"ExceptionType: message"``, never a traceback."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class Scheduler(Closing):
    """Runs tasks of ``queue`` with the handlers registered per kind.

    ``workers`` threads claim tasks once ``start()`` is called; ``workers=0`` is inline mode:
    ``submit`` and ``wait`` run due tasks in the caller's thread (for scripts and tests).  A lease
    lasts ``lease_s`` seconds and is renewed every third of it while a handler runs.  A failed
    attempt ``n`` is retried after ``backoff_s · 2^(n-1)`` seconds, at most ``max_backoff_s``.
    Idle workers look for due tasks every ``poll_s`` seconds (``submit`` wakes them at once).

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
    ) -> None:
        _check_settings(workers, lease_s, backoff_s, max_backoff_s, poll_s)
        self.queue = queue
        self.workers = workers
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
        self._inline = threading.local()
        self._dues: list[float] = []  # monotonic times our retries / delayed tasks fall due
        self._dues_lock = threading.Lock()

    # -- public ------------------------------------------------------------------------------

    def register(self, kind: str, handler: Handler) -> None:
        """Run ``handler`` for tasks of ``kind``; one handler per kind (``ConfigurationError``)."""
        if kind in self._handlers:
            raise ConfigurationError(f"a handler for task kind {kind!r} is already registered")
        self._handlers[kind] = handler

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
        if self.workers == 0:
            self._drain()
        else:
            with self._work_ready:
                self._work_ready.notify()
        return task_id

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
            if self.workers == 0:
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

        A handler still running then is left alone: its outcome is not recorded and its lease is
        no longer renewed, so the task stays ``running`` until the lease expires and is run again
        by the next scheduler on this database.  Idempotent.
        """
        if self._closing.is_set():
            return
        self._closing.set()
        with self._work_ready:
            self._work_ready.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._closed = True
        self._heartbeat.stop()
        if busy := sum(t.is_alive() for t in self._threads):
            logger.warning(
                "%d task handler(s) still running at close; their tasks will run again once "
                "their lease (%.1f s) expires",
                busy,
                self.lease_s,
            )

    def retry_delay(self, attempts: int) -> float:
        """Seconds before retrying after failed attempt number ``attempts`` (1 = the first)."""
        # The exponent is capped so a huge attempt count cannot overflow a float.
        return min(self.max_backoff_s, self.backoff_s * 2.0 ** min(attempts - 1, 60))

    # -- running tasks -----------------------------------------------------------------------

    def _work(self) -> None:
        while not self._closing.is_set():
            try:
                ran = self._run_one()
            except Exception:
                # The worker loop's edge: a database error (locked past the busy timeout, disk
                # full) must not kill the worker; it is logged and the claim retried after a pause.
                logger.exception("scheduler worker failed to claim or record a task")
                ran = False
            if not ran:
                with self._work_ready:
                    if not self._closing.is_set():
                        self._work_ready.wait(self.poll_s)

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
        task = self.queue.claim(self.lease_s)
        if task is None:
            return False
        handler = self._handlers.get(task.kind)
        if handler is None:
            unknown = ConfigurationError(
                f"no handler registered for task kind {task.kind!r}",
                hint="register one with Scheduler.register(kind, handler)",
            )
            self._record(task, describe(unknown), retry_in_s=None)
            return True
        error = self._call(handler, task)
        if error is None:
            self._record(task, None, retry_in_s=None)
        else:
            retry = None if task.attempts >= task.max_attempts else self.retry_delay(task.attempts)
            self._record(task, error, retry_in_s=retry)
        return True

    def _call(self, handler: Handler, task: Task) -> str | None:
        """Run ``handler`` under a heartbeat; the failure's text, or None on success."""
        with self._heartbeat.hold(task):
            try:
                handler(task)
            except Exception as exc:
                # The handler's edge: any failure of task code is this attempt's outcome.
                # BaseException (KeyboardInterrupt, SystemExit) passes: the task stays running
                # under its lease and is re-claimed, exactly as if the process had died.
                logger.warning(
                    "task %s (%s) attempt %d/%d failed",
                    task.task_id, task.kind, task.attempts, task.max_attempts, exc_info=exc,
                )  # fmt: skip
                return describe(exc)
        return None

    def _record(self, task: Task, error: str | None, *, retry_in_s: float | None) -> None:
        """Write the outcome of ``task``'s current claim (skipped once closed)."""
        if self._closed:
            logger.info(
                "scheduler closed: task %s stays running until its lease expires", task.task_id
            )
            return
        if error is None:
            kept = self.queue.complete(task.task_id, attempt=task.attempts)
        else:
            kept = self.queue.fail(task.task_id, error, retry_in_s, attempt=task.attempts)
            if retry_in_s is None:
                logger.error("task %s (%s) failed for good: %s", task.task_id, task.kind, error)
            else:
                self._expect(retry_in_s)
        if not kept:
            logger.warning(
                "task %s lost its claim (attempt %d) before finishing; its outcome is dropped",
                task.task_id,
                task.attempts,
            )
        with self._progress:
            self._progress.notify_all()

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
