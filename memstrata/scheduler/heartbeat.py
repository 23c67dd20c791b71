"""Lease renewal for running tasks, so a long handler is not mistaken for a dead one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from memstrata.store.queue import Task, TaskQueue

logger = logging.getLogger("memstrata.scheduler")


class Heartbeat:
    """One daemon thread that renews the lease of every held task each ``lease_s / 3`` seconds.

    A third of the lease leaves two missed beats (a slow disk, a busy writer) before the lease
    runs out.  The thread starts with the first ``hold`` and ends with ``stop``; after ``stop``
    no lease is renewed, so a task still held then is re-claimed once its lease expires.
    """

    def __init__(self, queue: TaskQueue, lease_s: float) -> None:
        self._queue = queue
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
                self._held.pop(task.task_id, None)

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
        while not self._stopped.wait(self._lease_s / 3):
            with self._lock:
                held = list(self._held.items())
            for task_id, attempt in held:
                self._renew(task_id, attempt)

    def _renew(self, task_id: str, attempt: int) -> None:
        # The thread's edge: a failed renewal (a locked or closed database) must not end the
        # heartbeat for every other task; the lease simply runs down and the task is re-claimed.
        try:
            kept = self._queue.renew(task_id, self._lease_s, attempt=attempt)
        except Exception:
            logger.exception("could not renew the lease of task %s", task_id)
            return
        if not kept:
            logger.warning(
                "task %s lost its lease (attempt %d); another worker may run it again",
                task_id,
                attempt,
            )
            with self._lock:
                if self._held.get(task_id) == attempt:
                    del self._held[task_id]
