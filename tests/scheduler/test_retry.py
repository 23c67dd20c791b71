"""Retrying a failed task: ``TaskQueue.retry`` on every queue (SQLite, PostgreSQL, Redis: the
``queue`` fixture of ``conftest.py``) and ``Scheduler.retry``, inline and with a worker thread."""

from __future__ import annotations

import time

import pytest

from memstrata.errors import ConflictError, NotFoundError, TaskNotFailed, TaskNotFound
from memstrata.scheduler import Scheduler, Task, TaskQueue


def failed(queue: TaskQueue, max_attempts: int = 1, **submit: str) -> str:
    """A task of cube ``c1`` run ``max_attempts`` times, failing each time: ``failed`` now."""
    task_id = queue.submit("k", {"n": 1}, cube_id="c1", max_attempts=max_attempts, **submit)
    for n in range(1, max_attempts + 1):
        claimed = queue.claim(30)
        assert claimed is not None and claimed.attempts == n
        assert queue.fail(task_id, f"ValueError: run {n}", retry_in_s=0, attempt=n)
    task = queue.get(task_id)
    assert task is not None and task.status == "failed"
    return task_id


def test_retry_gives_a_failed_task_one_more_attempt_keeping_its_history(queue: TaskQueue) -> None:
    task_id = failed(queue, max_attempts=2)
    before = queue.get(task_id)
    assert before is not None
    time.sleep(0.01)
    task = queue.retry(task_id)
    assert (task.task_id, task.status) == (task_id, "pending")
    assert (task.attempts, task.max_attempts) == (2, 3)  # one more attempt, the history kept
    assert (task.error, task.lease_until, task.payload) == ("ValueError: run 2", None, {"n": 1})
    assert before.updated_at < task.updated_at and task.run_after <= task.updated_at  # due now
    assert queue.outstanding("c1") == 1
    assert [t.task_id for t in queue.tasks("c1", status="pending")] == [task_id]
    assert queue.tasks("c1", status="failed") == []
    claimed = queue.claim(30)
    assert claimed is not None and (claimed.task_id, claimed.attempts) == (task_id, 3)
    assert queue.fail(task_id, "ValueError: run 3", retry_in_s=0, attempt=3)  # none left: failed
    again = queue.get(task_id)
    assert again is not None and (again.status, again.error) == ("failed", "ValueError: run 3")
    assert queue.retry(task_id).max_attempts == 4
    assert queue.claim(30) is not None and queue.complete(task_id, attempt=4)
    done = queue.get(task_id)
    assert done is not None and (done.status, done.attempts, done.error) == ("done", 4, None)


def test_retry_refuses_a_task_that_has_not_failed_and_an_unknown_id(queue: TaskQueue) -> None:
    task_id = queue.submit("k", {}, cube_id="c1")
    for status in ("pending", "running", "done"):
        with pytest.raises(TaskNotFailed, match=f"is {status}, not failed") as refused:
            queue.retry(task_id)
        assert isinstance(refused.value, ConflictError) and refused.value.status == 409
        task = queue.get(task_id)
        assert task is not None and (task.status, task.max_attempts) == (status, 5)
        if status == "pending":
            assert queue.claim(30) is not None
        elif status == "running":
            assert queue.complete(task_id)
    with pytest.raises(TaskNotFound) as unknown:
        queue.retry("no-such-task")
    assert isinstance(unknown.value, NotFoundError) and unknown.value.status == 404


def test_a_retried_task_stays_fenced_from_the_worker_that_lost_it(queue: TaskQueue) -> None:
    task_id = queue.submit("k", {}, max_attempts=1)
    lost = queue.claim(lease_s=0.05)  # its worker hangs: the lease runs out
    assert lost is not None
    time.sleep(0.08)
    assert queue.claim(30) is None
    task = queue.get(task_id)
    assert task is not None and task.status == "failed"
    assert task.error is not None and task.error.startswith("LeaseExpired:")
    queue.retry(task_id)
    again = queue.claim(30)
    assert again is not None and again.attempts == lost.attempts + 1  # numbers only grow
    assert not queue.complete(task_id, attempt=lost.attempts)  # the hung worker wakes up: refused
    assert queue.complete(task_id, attempt=again.attempts)


def test_a_retried_task_that_kept_its_dedupe_key_holds_it_again(queue: TaskQueue) -> None:
    task_id = failed(queue, dedupe_key="c1:seg")
    queue.retry(task_id)
    assert queue.submit("k", {"n": 2}, dedupe_key="c1:seg") == task_id  # pending: folded into it
    assert queue.outstanding() == 1


# -- the scheduler ----------------------------------------------------------------------------


def test_an_inline_retry_runs_the_task_before_returning(queue: TaskQueue) -> None:
    down = [True]

    def flaky(task: Task) -> None:
        if down[0]:
            raise ConnectionError("the endpoint is down")

    with Scheduler(queue, workers=0) as scheduler:
        scheduler.register("flaky", flaky)
        task_id = scheduler.submit("flaky", {}, max_attempts=1)
        gave_up = queue.get(task_id)
        assert gave_up is not None and gave_up.status == "failed"
        assert scheduler.retry(task_id).status == "failed"  # still down: failed at once
        down[0] = False
        task = scheduler.retry(task_id)
    assert (task.status, task.attempts, task.max_attempts, task.error) == ("done", 3, 3, None)


def test_a_retry_wakes_an_idle_worker(queue: TaskQueue) -> None:
    runs: list[int] = []

    def once_broken(task: Task) -> None:
        runs.append(task.attempts)
        if len(runs) == 1:
            raise ValueError("broken")

    # Idle workers poll every 30 s: only the wake-up can run the retried task within the wait.
    with Scheduler(queue, workers=1, poll_s=30) as scheduler:
        scheduler.register("job", once_broken)
        scheduler.start()
        task_id = scheduler.submit("job", {}, max_attempts=1)
        assert scheduler.wait(timeout=10) and runs == [1]
        time.sleep(0.2)  # the worker is idle, waiting to be woken
        scheduler.retry(task_id)
        assert scheduler.wait(timeout=10)
    task = queue.get(task_id)
    assert task is not None and (task.status, runs) == ("done", [1, 2])
