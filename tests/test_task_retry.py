"""``MemoryOS.retry_task`` and ``may_retry``: who may retry which failed task, and what a retry
does (on SQLite and PostgreSQL; the queue's side is ``tests/scheduler/test_retry.py``)."""

from __future__ import annotations

import pytest

from memstrata import MemoryOS
from memstrata.errors import (
    ConflictError,
    LLMError,
    PermissionDenied,
    TaskNotFound,
    UserNotFound,
    ValidationError,
)
from memstrata.scheduler import Task

pytestmark = pytest.mark.engines("sqlite", "postgres")


class Endpoint:
    """What the test task kind ``call`` needs: down until the test brings it up."""

    def __init__(self, mos: MemoryOS) -> None:
        self.up = False
        mos.scheduler.register("call", self.call)

    def call(self, task: Task) -> None:
        if not self.up:
            raise LLMError("the endpoint is down")


def failed_task(mos: MemoryOS, cube_id: str | None) -> str:
    """A ``call`` task of ``cube_id`` that failed (its one attempt ran inline)."""
    task_id = mos.scheduler.submit("call", {}, cube_id=cube_id, max_attempts=1)
    task = mos.scheduler.queue.get(task_id)
    assert task is not None and task.status == "failed"
    return task_id


def test_a_failed_task_retried_runs_to_completion(mos: MemoryOS, alice_cube: str) -> None:
    endpoint = Endpoint(mos)
    task_id = failed_task(mos, alice_cube)
    [listed] = mos.tasks(user_id="alice", status="failed")
    assert listed.task_id == task_id and mos.may_retry(listed, user_id="alice")
    again = mos.retry_task(task_id, user_id="alice")  # still down: failed again at once
    assert (again.status, again.attempts, again.max_attempts) == ("failed", 2, 2)
    assert again.error == "LLMError: the endpoint is down"
    endpoint.up = True
    done = mos.retry_task(task_id, user_id="alice")  # inline: run before returning
    assert (done.task_id, done.status, done.attempts, done.error) == (task_id, "done", 3, None)
    assert mos.tasks(user_id="alice", status="failed") == []
    assert not mos.may_retry(done, user_id="alice")
    with pytest.raises(ConflictError, match="is done, not failed") as refused:
        mos.retry_task(task_id, user_id="alice")
    assert refused.value.status == 409


def test_only_writers_of_the_cube_may_retry_and_others_do_not_learn_it_exists(
    mos: MemoryOS, alice_cube: str
) -> None:
    Endpoint(mos)
    task_id = failed_task(mos, alice_cube)
    [task] = mos.tasks(user_id="alice", status="failed")
    with pytest.raises(TaskNotFound) as unknown:
        mos.retry_task("no-such-task", user_id="bob")
    with pytest.raises(TaskNotFound) as hidden:  # bob has no grant: as if it did not exist
        mos.retry_task(task_id, user_id="bob")
    assert (hidden.value.status, hidden.value.message) == (
        404,
        unknown.value.message.replace("no-such-task", task_id),
    )
    mos.create_user("carol")
    mos.grant(alice_cube, "carol", "read", by="alice")
    with pytest.raises(PermissionDenied, match="may not write"):
        mos.retry_task(task_id, user_id="carol")
    assert not mos.may_retry(task, user_id="bob") and not mos.may_retry(task, user_id="carol")
    with pytest.raises(UserNotFound):
        mos.retry_task(task_id, user_id="nobody")
    with pytest.raises(ValidationError):
        mos.retry_task("bad\x00id", user_id="alice")
    unchanged = mos.scheduler.queue.get(task_id)
    assert unchanged is not None and (unchanged.status, unchanged.attempts) == ("failed", 1)
    mos.grant(alice_cube, "carol", "write", by="alice")
    assert mos.may_retry(task, user_id="carol")
    assert mos.retry_task(task_id, user_id="carol").status == "failed"  # retried; still down


def test_a_task_of_no_cube_is_retried_by_an_administrator_only(
    mos: MemoryOS, alice_cube: str
) -> None:
    endpoint = Endpoint(mos)
    task_id = failed_task(mos, None)
    mos.create_user("root", role="admin")
    with pytest.raises(TaskNotFound):
        mos.retry_task(task_id, user_id="alice")
    task = mos.scheduler.queue.get(task_id)
    assert task is not None
    assert not mos.may_retry(task, user_id="alice") and mos.may_retry(task, user_id="root")
    endpoint.up = True
    assert mos.retry_task(task_id, user_id="root").status == "done"
