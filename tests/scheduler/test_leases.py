"""Leases under pressure: a heartbeat that is late, a CPU-bound task, a renewal that races the end
of its task, and ``close`` giving a running task back (``release``); on the SQLite queue and the
Redis queue (``conftest.py``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection
from typing import Any

import pytest

from memstrata.scheduler import Scheduler, Task, TaskQueue
from memstrata.store.sqlite import SQLiteStore


class Wrapped:
    """A queue that passes every call on to ``queue``; subclasses change some."""

    def __init__(self, queue: TaskQueue) -> None:
        self.queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


class SlowRenewals(Wrapped):
    """A queue whose first renewal waits ``delay_s`` (a starved heartbeat: a long write ahead of
    it, a busy CPU) before it is made."""

    def __init__(self, queue: TaskQueue, delay_s: float) -> None:
        super().__init__(queue)
        self.delay_s = delay_s
        self.renewals = 0

    def renew(self, task_id: str, lease_s: float, *, attempt: int | None = None) -> bool:
        self.renewals += 1
        if self.renewals == 1:
            time.sleep(self.delay_s)
        return self.queue.renew(task_id, lease_s, attempt=attempt)


class RenewalAfterTheEnd(Wrapped):
    """A queue whose renewals wait until a task has completed: the heartbeat took its list of
    held tasks just before the task finished."""

    def __init__(self, queue: TaskQueue) -> None:
        super().__init__(queue)
        self.completed = threading.Event()
        self.refused = 0

    def renew(self, task_id: str, lease_s: float, *, attempt: int | None = None) -> bool:
        self.completed.wait(5)
        kept = self.queue.renew(task_id, lease_s, attempt=attempt)
        self.refused += not kept
        return kept

    def complete(self, task_id: str, *, attempt: int | None = None) -> bool:
        done = self.queue.complete(task_id, attempt=attempt)
        self.completed.set()
        return done


def burn(seconds: float) -> int:
    """Hold the CPU (pure Python, so the GIL too, between switches) for ``seconds``."""
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += sum(range(200))
    return n


def complaints(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_late_heartbeat_does_not_hand_a_live_task_to_another_worker(
    queue: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    slow = SlowRenewals(queue, delay_s=0.8)  # four leases late
    runs: list[int] = []

    def long(task: Task) -> None:
        runs.append(task.attempts)
        burn(1.2)

    with Scheduler(slow, workers=2, lease_s=0.2, poll_s=0.01) as scheduler:
        scheduler.register("long", long)
        scheduler.start()
        task_id = scheduler.submit("long", {})
        assert scheduler.wait(timeout=10)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("done", 1)
    assert runs == [1]  # the idle worker did not take it when its lease ran out
    assert complaints(caplog) == []


def test_a_cpu_bound_task_longer_than_its_lease_keeps_it(
    store: SQLiteStore, queue: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []
    leases: list[float] = []
    stop = threading.Event()

    def busy_writer() -> None:  # another thread's writes contend for the write lock
        while not stop.is_set():
            with store.transaction():
                time.sleep(0.02)
            time.sleep(0.002)

    def cpu_bound(task: Task) -> None:
        runs.append(task.attempts)
        for _ in range(6):  # 1.5 s: five leases
            burn(0.25)
            now = queue.get(task.task_id)
            assert now is not None and now.lease_until is not None
            leases.append(now.lease_until.timestamp())

    rivals = [threading.Thread(target=burn, args=(1.5,)) for _ in range(2)]
    writer = threading.Thread(target=busy_writer)
    with Scheduler(queue, workers=2, lease_s=0.3, poll_s=0.01) as scheduler:
        scheduler.register("cpu", cpu_bound)
        scheduler.start()
        for thread in [*rivals, writer]:
            thread.start()
        task_id = scheduler.submit("cpu", {})
        assert scheduler.wait(timeout=15)
    stop.set()
    for thread in [*rivals, writer]:
        thread.join()
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("done", 1)
    assert runs == [1]
    assert leases == sorted(leases) and leases[-1] - leases[0] > 0.9  # renewed all along
    assert complaints(caplog) == []


def test_a_task_that_ends_while_its_renewal_waits_is_not_reported_lost(
    queue: TaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    late = RenewalAfterTheEnd(queue)
    with Scheduler(late, workers=1, lease_s=0.2, poll_s=0.01) as scheduler:
        scheduler.register("short", lambda task: time.sleep(0.15))  # a beat falls inside it
        scheduler.start()
        task_id = scheduler.submit("short", {})
        assert scheduler.wait(timeout=5)
        deadline = time.monotonic() + 2
        while not late.refused and time.monotonic() < deadline:
            time.sleep(0.01)
    assert late.refused >= 1  # the late renewal found the task done
    task = queue.get(task_id)
    assert task is not None and task.status == "done"
    assert complaints(caplog) == []


def test_claim_skips_the_callers_own_running_tasks(queue: TaskQueue) -> None:
    mine = queue.submit("k", {}, max_attempts=1)
    assert queue.claim(lease_s=0.05) is not None
    time.sleep(0.08)  # its lease has run out, but its worker is alive: the caller says so
    skip: Collection[str] = [mine]
    assert queue.claim(lease_s=30, skip=skip) is None  # neither taken ...
    task = queue.get(mine)
    assert task is not None and task.status == "running"  # ... nor failed as exhausted
    assert queue.renew(mine, 30, attempt=1)  # the late heartbeat still holds it
    assert queue.complete(mine, attempt=1)


def test_release_gives_a_running_task_back_without_counting_the_attempt(
    queue: TaskQueue,
) -> None:
    task_id = queue.submit("k", {}, max_attempts=2, dedupe_key="k:c1")
    claimed = queue.claim(30)
    assert claimed is not None
    assert queue.fail(task_id, "ValueError: first", retry_in_s=0, attempt=1)
    again = queue.claim(30)
    assert again is not None and again.attempts == 2
    assert not queue.release(task_id, attempt=1)  # an old claim is fenced out
    assert queue.release(task_id, attempt=2)
    task = queue.get(task_id)
    assert task is not None
    assert (task.status, task.attempts, task.lease_until) == ("pending", 1, None)
    assert task.error == "ValueError: first"  # the last real failure is kept
    assert queue.submit("k", {}, dedupe_key="k:c1") == task_id  # pending: its key holds again
    last = queue.claim(30)
    assert last is not None and last.attempts == 2  # the released run was not counted
    assert queue.complete(task_id, attempt=2)
