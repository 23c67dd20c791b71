"""``POST /tasks/{task_id}/retry`` and ``Client.retry_task``: a failed task retried by a writer of
its cube, refused to everyone else as the SDK refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
import pytest

from memstrata.client import Client
from memstrata.errors import ConflictError, LLMError, NotFoundError, PermissionDenied
from memstrata.scheduler import Task

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account, Server

    NewUser = Callable[..., Account]
    OwnerCube = tuple[Account, str]

KIND = "test-flaky"


def _flaky(task: Task) -> None:
    """Fails every attempt before number ``payload["until"]``."""
    if task.attempts < task.payload["until"]:
        raise LLMError("the endpoint is down")


@pytest.fixture(scope="session")
def failing(server: Server) -> Callable[[str], str]:
    """Make a task of a cube that fails its one attempt (a retry succeeds); returns its id."""
    server.memory.scheduler.register(KIND, _flaky)

    def make(cube_id: str) -> str:
        task_id = server.memory.scheduler.submit(KIND, {"until": 2}, cube_id=cube_id,
                                                 max_attempts=1)  # fmt: skip
        assert server.memory.wait(cube_id, timeout=60)
        return task_id

    return make


def _code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def _task(owner: Account, cube_id: str, task_id: str) -> dict[str, object]:
    [found] = [t for t in owner.http.get("/tasks", params={"cube_id": cube_id}).json()
               if t["task_id"] == task_id]  # fmt: skip
    return dict(found)


def test_a_writer_retries_a_failed_task(
    owner_cube: OwnerCube, new_user: NewUser, server: Server, failing: Callable[[str], str]
) -> None:
    owner, cube_id = owner_cube
    task_id = failing(cube_id)
    listed = _task(owner, cube_id, task_id)
    assert (listed["status"], listed["attempts"], listed["max_attempts"]) == ("failed", 1, 1)
    stranger, reader = new_user("stranger"), new_user("reader")
    server.memory.grant(cube_id, reader.user_id, "read", by=owner.user_id)
    refused = [
        stranger.http.post(f"/tasks/{task_id}/retry"),  # its existence does not leak
        stranger.http.post("/tasks/no-such-task/retry"),
        reader.http.post(f"/tasks/{task_id}/retry"),
    ]
    assert [_code(r) for r in refused] == [(404, "not_found")] * 2 + [(403, "permission_denied")]
    retried = owner.http.post(f"/tasks/{task_id}/retry")
    assert retried.status_code == 200, retried.text
    body = retried.json()
    assert body.keys() == listed.keys() and (body["task_id"], body["max_attempts"]) == (task_id, 2)
    assert body["status"] in ("pending", "running", "done")  # a worker may have run it already
    wait = owner.http.post("/tasks/wait", json={"cube_id": cube_id, "timeout_s": 60})
    assert wait.json() == {"done": True}
    done = _task(owner, cube_id, task_id)
    assert (done["status"], done["attempts"], done["error"]) == ("done", 2, None)
    assert _code(owner.http.post(f"/tasks/{task_id}/retry")) == (409, "conflict")


def test_the_client_retries_as_the_sdk_does(
    owner_cube: OwnerCube, new_user: NewUser, server: Server, failing: Callable[[str], str]
) -> None:
    owner, cube_id = owner_cube
    task_id = failing(cube_id)
    reader = new_user("reader")
    server.memory.grant(cube_id, reader.user_id, "read", by=owner.user_id)
    with Client(server.url, owner.key) as client, Client(server.url, reader.key) as other:
        with pytest.raises(PermissionDenied):
            other.retry_task(task_id)
        with pytest.raises(NotFoundError, match="no background task 'no-such-task'"):
            other.retry_task("no-such-task")
        task = client.retry_task(task_id)
        assert isinstance(task, Task) and (task.task_id, task.max_attempts) == (task_id, 2)
        assert client.wait(cube_id, timeout=60)
        with pytest.raises(ConflictError, match="is done, not failed"):
            client.retry_task(task_id)
