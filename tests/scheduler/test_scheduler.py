"""The durable scheduler: queue semantics, retries, inline mode, threads, processes, crashes.

Each test runs against the SQLite queue and the Redis queue (the ``queue`` fixture of
``conftest.py``); the process tests give ``task_worker.py`` the same queue's address."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memstrata.errors import ConfigurationError, ValidationError
from memstrata.scheduler import Scheduler, Task, TaskQueue
from memstrata.store.queue import MAX_ERROR_CHARS

WORKER = Path(__file__).with_name("task_worker.py")


def status(queue: TaskQueue, task_id: str) -> str:
    task = queue.get(task_id)
    assert task is not None
    return task.status


# -- the queue ------------------------------------------------------------------------------


def test_submit_claim_complete(queue: TaskQueue) -> None:
    assert isinstance(queue, TaskQueue)
    task_id = queue.submit("promote", {"segment": "s1"}, cube_id="c1")
    pending = queue.get(task_id)
    assert pending is not None
    assert (pending.status, pending.attempts, pending.payload) == ("pending", 0, {"segment": "s1"})
    assert pending.run_after.tzinfo is not None
    claimed = queue.claim(lease_s=30)
    assert claimed is not None and claimed.task_id == task_id
    assert (claimed.status, claimed.attempts) == ("running", 1)
    assert claimed.lease_until is not None and claimed.lease_until > claimed.updated_at
    assert queue.claim(lease_s=30) is None  # nobody else gets it
    assert queue.outstanding("c1") == 1 and queue.outstanding("c2") == 0
    assert queue.complete(task_id, attempt=1)
    assert not queue.complete(task_id)  # repeating it changes nothing
    done = queue.get(task_id)
    assert done is not None and (done.status, done.lease_until, done.error) == ("done", None, None)
    assert queue.outstanding() == 0
    assert [t.task_id for t in queue.tasks(cube_id="c1", status="done")] == [task_id]


def test_due_order_and_delay(queue: TaskQueue) -> None:
    later = queue.submit("k", {}, delay_s=60)
    first = queue.submit("k", {})
    second = queue.submit("k", {})
    claimed = [queue.claim(30), queue.claim(30), queue.claim(30)]
    assert [t.task_id if t else None for t in claimed] == [first, second, None]
    assert status(queue, later) == "pending"
    assert [t.task_id for t in queue.tasks()] == [second, first, later]  # newest first


def test_dedupe_key_holds_while_pending_and_a_running_task_gets_a_follow_up(
    queue: TaskQueue,
) -> None:
    first = queue.submit("summarise", {"n": 1}, dedupe_key="c1:seg")
    assert queue.submit("summarise", {"n": 2}, dedupe_key="c1:seg") == first
    claimed = queue.claim(30)
    assert claimed is not None and claimed.payload == {"n": 1}
    follow_up = queue.submit("summarise", {"n": 3}, dedupe_key="c1:seg")  # first is running
    assert follow_up != first
    assert queue.submit("summarise", {"n": 4}, dedupe_key="c1:seg") == follow_up
    queue.complete(first)
    old = queue.get(first)
    assert old is not None and old.dedupe_key is None and old.status == "done"
    assert queue.outstanding() == 1


def test_bad_submissions_are_rejected(queue: TaskQueue) -> None:
    with pytest.raises(ValidationError, match="JSON"):
        queue.submit("k", {"x": object()})
    with pytest.raises(ValidationError):
        queue.submit("", {})
    with pytest.raises(ValidationError):
        queue.submit("k", {}, max_attempts=0)
    with pytest.raises(ValidationError):
        queue.submit("k", {}, delay_s=-1)
    assert queue.tasks() == []


def test_an_expired_lease_is_reclaimed_and_the_old_claim_is_fenced(queue: TaskQueue) -> None:
    task_id = queue.submit("k", {})
    assert queue.claim(lease_s=0.05) is not None
    time.sleep(0.08)
    again = queue.claim(lease_s=30)
    assert again is not None and (again.task_id, again.attempts) == (task_id, 2)
    assert not queue.renew(task_id, 30, attempt=1)
    assert not queue.fail(task_id, "late", None, attempt=1)
    assert not queue.complete(task_id, attempt=1)
    assert queue.renew(task_id, 30, attempt=2)
    assert queue.complete(task_id, attempt=2)


def test_a_task_that_keeps_killing_its_worker_ends_failed(queue: TaskQueue) -> None:
    task_id = queue.submit("k", {}, max_attempts=1)
    assert queue.claim(lease_s=0.05) is not None
    time.sleep(0.08)
    assert queue.claim(lease_s=30) is None
    task = queue.get(task_id)
    assert task is not None and task.status == "failed"
    assert task.error is not None and task.error.startswith("LeaseExpired:")


def test_fail_retries_until_attempts_run_out(queue: TaskQueue) -> None:
    task_id = queue.submit("k", {}, max_attempts=2)
    queue.claim(30)
    assert queue.fail(task_id, "ValueError: one", retry_in_s=0)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.error) == ("pending", "ValueError: one")
    queue.claim(30)
    queue.fail(task_id, "ValueError: two", retry_in_s=0)  # asks for a retry; none is left
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("failed", 2)
    assert task.error == "ValueError: two"


# -- the scheduler, inline ------------------------------------------------------------------


def test_inline_submit_runs_the_task_before_returning(queue: TaskQueue) -> None:
    seen: list[str] = []
    with Scheduler(queue, workers=0) as scheduler:

        def parent(task: Task) -> None:
            seen.append(task.kind)
            scheduler.submit("child", {}, cube_id="c1")  # queued, run next by the same drain

        scheduler.register("parent", parent)
        scheduler.register("child", lambda task: seen.append(task.kind))
        task_id = scheduler.submit("parent", {}, cube_id="c1")
        assert seen == ["parent", "child"]
        assert status(queue, task_id) == "done"
        assert scheduler.wait("c1", timeout=0)


def test_a_queue_only_scheduler_leaves_its_tasks_to_another(queue: TaskQueue) -> None:
    seen: list[str] = []
    with Scheduler(queue, workers=0, queue_only=True, poll_s=0.02) as front:
        front.register("job", lambda task: seen.append("front"))
        task_id = front.submit("job", {}, cube_id="c1")
        assert seen == [] and status(queue, task_id) == "pending"
        assert not front.wait("c1", timeout=0.1)  # nothing runs it here
        with Scheduler(queue, workers=1, poll_s=0.02) as worker:
            worker.register("job", lambda task: seen.append("worker"))
            worker.start()
            assert front.wait("c1", timeout=10)
    assert seen == ["worker"] and status(queue, task_id) == "done"


def test_retries_with_backoff_then_failed_with_the_error_kept(queue: TaskQueue) -> None:
    runs: list[float] = []

    def broken(task: Task) -> None:
        runs.append(time.monotonic())
        raise ValueError("boom " + "x" * 10_000)

    # The default poll_s is 0.2 s: wait() must wake for each retry, not for each poll.
    with Scheduler(queue, workers=0, backoff_s=0.02, max_backoff_s=0.05) as scheduler:
        scheduler.register("broken", broken)
        task_id = scheduler.submit("broken", {}, max_attempts=4)  # the failure is not raised
        task = queue.get(task_id)
        assert task is not None and (task.status, task.attempts) == ("pending", 1)
        assert scheduler.wait(timeout=2)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("failed", 4)
    assert task.error is not None and task.error.startswith("ValueError: boom xxx")
    assert len(task.error) <= MAX_ERROR_CHARS and "Traceback" not in task.error
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert len(gaps) == 3
    assert all(gap >= least - 0.005 for gap, least in zip(gaps, [0.02, 0.04, 0.05], strict=True))


def test_backoff_doubles_up_to_the_cap(queue: TaskQueue) -> None:
    scheduler = Scheduler(queue, workers=0, backoff_s=1.0, max_backoff_s=5.0)
    assert [scheduler.retry_delay(n) for n in (1, 2, 3, 4, 1000)] == [1, 2, 4, 5, 5]
    with pytest.raises(ConfigurationError, match="allowed"):
        Scheduler(queue, workers=-1)


def test_a_flaky_task_succeeds_on_retry(queue: TaskQueue) -> None:
    calls = []

    def flaky(task: Task) -> None:
        calls.append(task.attempts)
        if task.attempts < 3:
            raise ConnectionError("try again")

    with Scheduler(queue, workers=0, backoff_s=0.01) as scheduler:
        scheduler.register("flaky", flaky)
        task_id = scheduler.submit("flaky", {})
        assert scheduler.wait(timeout=2)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.error, calls) == ("done", None, [1, 2, 3])


def test_an_unknown_kind_fails_with_a_clear_error(queue: TaskQueue) -> None:
    with Scheduler(queue, workers=0) as scheduler:
        task_id = scheduler.submit("nope", {})
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("failed", 1)
    assert task.error is not None
    assert task.error.startswith("ConfigurationError: no handler registered for task kind 'nope'")


def test_wait_times_out(queue: TaskQueue) -> None:
    done: list[str] = []
    with Scheduler(queue, workers=0, poll_s=0.02) as scheduler:
        scheduler.register("k", lambda task: done.append(task.task_id))
        scheduler.submit("k", {}, cube_id="c1", delay_s=0.6)
        started = time.monotonic()
        assert not scheduler.wait("c1", timeout=0.1)
        assert 0.1 <= time.monotonic() - started < 0.5
        assert scheduler.wait("c2", timeout=0)  # another cube has nothing outstanding
        assert scheduler.wait("c1", timeout=2) and len(done) == 1


# -- the scheduler, with worker threads -----------------------------------------------------


def test_three_workers_run_each_task_exactly_once(queue: TaskQueue) -> None:
    ran: list[tuple[int, int]] = []
    lock = threading.Lock()

    def job(task: Task) -> None:
        time.sleep(0.001)
        with lock:
            ran.append((task.payload["n"], threading.get_ident()))

    with Scheduler(queue, workers=3, poll_s=0.02) as scheduler:
        scheduler.register("job", job)
        scheduler.start()
        for n in range(50):
            scheduler.submit("job", {"n": n}, cube_id="c1")
        assert scheduler.wait("c1", timeout=10)
    assert sorted(n for n, _ in ran) == list(range(50))
    assert len({thread for _, thread in ran}) > 1
    assert {t.status for t in queue.tasks(limit=100)} == {"done"}


def test_close_while_a_task_runs_releases_it_for_the_next_scheduler(
    queue: TaskQueue,
) -> None:
    started, release = threading.Event(), threading.Event()

    def blocking(task: Task) -> None:
        started.set()
        release.wait(5)

    scheduler = Scheduler(queue, workers=1, lease_s=30, poll_s=0.02)
    scheduler.register("blocking", blocking)
    scheduler.start()
    task_id = scheduler.submit("blocking", {})
    assert started.wait(2)
    scheduler.close(timeout=0.05)
    task = queue.get(task_id)  # given back at once: no waiting for its 30 s lease
    assert task is not None and task.lease_until is None
    assert (task.status, task.attempts) == ("pending", 0)
    release.set()  # the abandoned handler now returns; its outcome must not be written
    for thread in scheduler._threads:
        thread.join(2)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("pending", 0)
    with Scheduler(queue, workers=0, poll_s=0.05) as again:
        again.register("blocking", lambda task: None)
        assert again.wait(timeout=2)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("done", 1)


# -- across processes -----------------------------------------------------------------------


def test_two_processes_never_run_the_same_task_twice(
    queue: TaskQueue, address: str, tmp_path: Path
) -> None:
    ids = {queue.submit("job", {"n": n}) for n in range(60)}
    outs = [tmp_path / "a.txt", tmp_path / "b.txt"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "share", address, str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:  # start both at once so their claims race
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.close()
        assert [proc.wait(timeout=30) for proc in procs] == [0, 0]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
    lines = [line.split() for out in outs for line in out.read_text().splitlines()]
    assert sorted(task_id for task_id, _ in lines) == sorted(ids)  # each once, none twice
    assert len({pid for _, pid in lines}) == 2
    assert queue.outstanding() == 0


def test_a_killed_process_loses_no_task(queue: TaskQueue, address: str, tmp_path: Path) -> None:
    task_id = queue.submit("slow", {"segment": "s1"})
    marker = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, str(WORKER), "crash", address, str(marker)])
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert marker.read_text() == task_id
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("running", 1)
    finished: list[dict[str, object]] = []
    with Scheduler(queue, workers=1, lease_s=0.5, poll_s=0.05) as scheduler:
        scheduler.register("slow", lambda task: finished.append(task.payload))
        scheduler.start()
        assert scheduler.wait(timeout=5)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("done", 2)
    assert finished == [{"segment": "s1"}]
