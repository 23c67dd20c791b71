"""Lease renewal for running tasks, so a long handler is not mistaken for a dead one."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memstrata.errors import MemstrataError
from memstrata.store.queue import Task, TaskQueue

logger = logging.getLogger("memstrata.scheduler")

#: Renewals per lease: three beats may be missed (a slow disk, a long write of another thread,
#: a starved CPU) before the lease runs out.
BEATS_PER_LEASE = 4


class Heartbeat:
    """One daemon thread of its own that renews the lease of every held task each
    ``lease_s / BEATS_PER_LEASE`` seconds.

    Beats keep to a fixed schedule: a renewal that had to wait (for the database's write lock,
    for the CPU) does not push the next one back.  The thread starts with the first ``hold`` and
    ends with ``stop``; after ``stop`` no lease is renewed.  A renewal that finds the claim gone
    is reported only if the task is still held (a task that has just finished is not lost).
    Thread-safe.
    """

    def __init__(self, queue: TaskQueue, lease_s: float) -> None:
        self._queue = queue
        self._interval = lease_s / BEATS_PER_LEASE
        self._lease_s = lease_s
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def hold(self, task: Task) -> Iterator[None]:
        """Keep ``task``'s claim (``task.attempts``) alive for the duration of the block."""
        with self._lock:
            self._held[task.task_id] = task.attempts
            self._start()
        try:
            yield
        finally:
            with self._lock:
                if self._held.get(task.task_id) == task.attempts:
                    del self._held[task.task_id]

    def stop(self) -> None:
        """Stop renewing (idempotent); returns once the thread has ended."""
        self._stopped.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _start(self) -> None:
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(
                target=self._run, name="memstrata-heartbeat", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        beat = time.monotonic() + self._interval
        while not self._stopped.wait(max(0.0, beat - time.monotonic())):
            # The next beat is due an interval after this one was, however long this one takes;
            # if it is overdue already, it follows at once.
            beat = max(beat + self._interval, time.monotonic())
            with self._lock:
                held = list(self._held.items())
            for task_id, attempt in held:
                if self._stopped.is_set():
                    return
                self._renew(task_id, attempt)

    def _renew(self, task_id: str, attempt: int) -> None:
        # The thread's edge: a failed renewal (a locked or closed database) must not end the
        # heartbeat for every other task; the next beat tries again.
        try:
            kept = self._queue.renew(task_id, self._lease_s, attempt=attempt)
        except MemstrataError as exc:
            logger.warning("could not renew the lease of task %s: %s", task_id, exc)
            return
        except Exception:
            logger.exception("could not renew the lease of task %s", task_id)
            return
        if kept:
            return
        with self._lock:
            lost = self._held.get(task_id) == attempt
            if lost:
                del self._held[task_id]
        if lost:  # else its worker finished it while this renewal waited: nothing was lost
            logger.warning(
                "task %s lost its lease (attempt %d); another worker may run it again",
                task_id,
                attempt,
            )
