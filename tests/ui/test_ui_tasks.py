"""The tasks page's retry button: shown to writers of a failed task's cube, posting with the CSRF
token, and refused to everyone else exactly as the SDK refuses."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

import pytest

from memstrata.errors import LLMError, MemstrataError
from memstrata.scheduler import Task
from tests.ui.conftest import Inspector, Person
from tests.ui.test_ui_pages import refused_text

Cube = tuple[Person, str, list[str]]
SignIn = Callable[[str], Person]
KIND = "test-flaky"


def _flaky(task: Task) -> None:
    """Fails every attempt before number ``payload["until"]``."""
    if task.attempts < task.payload["until"]:
        raise LLMError("the endpoint is down")


@pytest.fixture(scope="session")
def failing(inspector: Inspector) -> Callable[[str], str]:
    """Make a task of a cube that fails its one attempt (a retry succeeds); returns its id."""
    inspector.memory.scheduler.register(KIND, _flaky)

    def make(cube_id: str) -> str:  # the inspector's tasks run inline: failed on return
        return inspector.memory.scheduler.submit(KIND, {"until": 2}, cube_id=cube_id,
                                                 max_attempts=1)  # fmt: skip

    return make


def retry_path(task_id: str) -> str:
    return f"/ui/tasks/{task_id}/retry"


def test_a_writer_retries_a_failed_task(
    inspector: Inspector, cube: Cube, failing: Callable[[str], str]
) -> None:
    owner, cube_id, _ = cube
    task_id = failing(cube_id)
    page = owner.http.get("/ui/tasks", params={"cube": cube_id})
    assert page.status_code == 200 and f'action="{retry_path(task_id)}"' in page.text
    assert page.text.count(">Retry</button>") == 1  # the other tasks are done
    assert owner.http.post(retry_path(task_id), data={}).status_code == 403  # no CSRF token
    [still] = inspector.memory.tasks(user_id=owner.user_id, cube_id=cube_id, status="failed")
    assert still.task_id == task_id
    done = owner.http.post(retry_path(task_id), data={"csrf_token": owner.csrf()})
    assert done.status_code == 303 and done.headers["location"].startswith("/ui/tasks?")
    assert inspector.memory.tasks(user_id=owner.user_id, cube_id=cube_id, status="failed") == []
    shown = owner.http.get(done.headers["location"])
    assert f"Task {task_id} ({KIND}) retried: now done." in shown.text
    assert ">Retry</button>" not in shown.text


def test_a_retry_the_sdk_refuses_the_ui_refuses(
    inspector: Inspector, cube: Cube, sign_in: SignIn, failing: Callable[[str], str]
) -> None:
    owner, cube_id, _ = cube
    task_id = failing(cube_id)
    reader, stranger = sign_in("reader"), sign_in("stranger")
    inspector.memory.grant(cube_id, reader.user_id, "read", by=owner.user_id)
    listed = reader.http.get("/ui/tasks", params={"cube": cube_id})
    assert listed.status_code == 200 and KIND in listed.text  # seen, but no button
    assert retry_path(task_id) not in listed.text
    cases = [(reader, task_id, 403), (stranger, task_id, 404), (owner, "no-such-task", 404)]
    for person, asked, status in cases:
        with pytest.raises(MemstrataError) as sdk:
            inspector.memory.retry_task(asked, user_id=person.user_id)
        page = person.http.post(retry_path(asked), data={"csrf_token": person.csrf()})
        assert page.status_code == sdk.value.status == status
        assert refused_text(page) == escape(sdk.value.message)
    [task] = inspector.memory.tasks(user_id=owner.user_id, cube_id=cube_id, status="failed")
    assert (task.task_id, task.attempts) == (task_id, 1)
