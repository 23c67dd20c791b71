"""What the scheduler logs: one line for an expected failure or a handler that outlived
``close``, a traceback only for a bug."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata.errors import ConflictError, StorageError
from memstrata.scheduler import Scheduler, Task
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[SQLiteTaskQueue]:
    store = SQLiteStore(tmp_path / "tasks.db")
    yield SQLiteTaskQueue(store)
    store.close()


def traced(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info is not None]


def test_a_retried_conflict_that_then_succeeds_is_one_info_line(
    queue: SQLiteTaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memstrata")

    def promote(task: Task) -> None:
        if task.attempts == 1:
            raise ConflictError("item 's1' changed since it was read (version 3, now 4)")

    with Scheduler(queue, workers=0, backoff_s=0.01) as scheduler:
        scheduler.register("promote", promote)
        task_id = scheduler.submit("promote", {"segment_id": "s1"})
        assert scheduler.wait(timeout=2)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts) == ("done", 2)
    assert traced(caplog) == []
    (line,) = [r for r in caplog.records if "ConflictError" in r.getMessage()]
    assert line.levelno == logging.INFO and "\n" not in line.getMessage()
    assert "attempt 1/5" in line.getMessage() and "retried in" in line.getMessage()


def test_an_unexpected_error_keeps_its_traceback_and_failing_for_good_is_an_error(
    queue: SQLiteTaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(task: Task) -> None:
        raise KeyError("segment_id")  # a bug: its traceback is what a developer needs

    with Scheduler(queue, workers=0, backoff_s=0.01) as scheduler:
        scheduler.register("broken", broken)
        scheduler.submit("broken", {}, max_attempts=2)
        assert scheduler.wait(timeout=2)
    warned, failed = caplog.records[0], caplog.records[-1]
    assert warned.levelno == logging.WARNING and warned.exc_info is not None
    assert failed.levelno == logging.ERROR and "failed for good" in failed.getMessage()


def test_a_handler_that_outlives_close_ends_quietly_and_its_task_is_released(
    queue: SQLiteTaskQueue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memstrata")
    started, store_closed = threading.Event(), threading.Event()

    def consolidate(task: Task) -> None:
        started.set()
        store_closed.wait(5)
        raise StorageError("write to memory.db failed: Cannot operate on a closed database.")

    scheduler = Scheduler(queue, workers=1, poll_s=0.01)
    scheduler.register("consolidate", consolidate)
    scheduler.start()
    task_id = scheduler.submit("consolidate", {}, cube_id="c1")
    assert started.wait(5)
    scheduler.close(timeout=0.05)
    store_closed.set()
    for thread in scheduler._threads:
        thread.join(5)
    task = queue.get(task_id)
    assert task is not None and (task.status, task.attempts, task.error) == ("pending", 0, None)
    assert traced(caplog) == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    lines = [r.getMessage() for r in caplog.records if task_id in r.getMessage()]
    assert any("released" in line for line in lines)
    assert any("after the scheduler closed" in line for line in lines)


def test_a_worker_whose_claims_keep_failing_backs_off_and_logs_sparingly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 5 of issue 24: a claim that failed on every call (a poisoned Redis queue) logged
    a traceback per poll, ~18 KB/s.  Now one traceback, then one line per doubling of the count,
    and the pause doubles, so a second and a half of failures is a handful of lines."""
    store = SQLiteStore(tmp_path / "tasks.db")
    queue = SQLiteTaskQueue(store)
    store.close()  # every claim now fails
    caplog.set_level(logging.DEBUG, logger="memstrata")
    scheduler = Scheduler(queue, workers=1, poll_s=0.001)
    scheduler.start()
    threading.Event().wait(1.5)  # at 1 ms a poll, the old loop logged hundreds of tracebacks
    scheduler.close()
    records = [r for r in caplog.records if "claim or record" in r.getMessage()]
    assert len(traced(caplog)) == 1 and records[0].exc_info is not None
    assert 1 <= len(records) <= 12
    assert all("times in a row" in r.getMessage() for r in records[1:])
