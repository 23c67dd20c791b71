"""Running the service: ``/configure``, ``/tasks``, ``/tasks/wait``, ``/tasks/{task_id}/retry``,
``/health``, ``/metrics``."""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import Query, Request
from fastapi.responses import PlainTextResponse

from memstrata.limits import MAX_TOP_K
from memstrata.retrieval.stages import CLOCK
from memstrata.scheduler import Task, TaskStatus
from memstrata.server import metrics
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import JSON_ERRORS, make_router
from memstrata.server.schemas import ConfigureIn, Health, WaitIn, WaitOut
from memstrata.version import version

router = make_router("operations")
#: Routes that declare their own responses: ``/health`` (no key, no errors) and ``/metrics``.
public = make_router("operations", errors=False)


@public.head("/health", include_in_schema=False)
@public.get("/health", summary="Liveness (no API key needed; HEAD too)")
def health() -> Health:
    return Health(status="ok", version=version())


@router.post("/configure", summary="Change runtime search settings (admin only)")
def configure(body: ConfigureIn, memory: Memory, user: Caller) -> dict[str, int | float]:
    """Change settings named in ``MemoryOS.RUNTIME_SETTINGS`` for this process; returns them all.

    Other settings are fixed at start-up and are a 422 here.
    """
    updated = memory.configure(by=user.user_id, **body.model_dump(exclude_unset=True))
    return {name: getattr(updated, name) for name in memory.RUNTIME_SETTINGS}


@router.get("/tasks", summary="Recent background tasks of the caller's cubes, newest first")
def tasks(
    memory: Memory,
    user: Caller,
    cube_id: str | None = None,
    status: TaskStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 100,
) -> list[Task]:
    return memory.tasks(user_id=user.user_id, cube_id=cube_id, status=status, limit=limit)


@router.post("/tasks/{task_id}/retry", summary="Give a failed background task one more attempt")
def retry_task(task_id: str, memory: Memory, user: Caller) -> Task:
    """``MemoryOS.retry_task``: the task, ``pending`` again (or already running or finished);
    404 for a task the caller cannot see, 403 without ``write``, 409 when it has not failed."""
    return memory.retry_task(task_id, user_id=user.user_id)


@router.post("/tasks/wait", summary="Wait until a cube's background tasks are done")
def wait(memory: Memory, user: Caller, body: WaitIn | None = None) -> WaitOut:
    """Block until ``cube_id`` (default: each cube the caller may read) has no outstanding task,
    or ``timeout_s`` (at most ``limits.MAX_WAIT_S``) has passed; ``done`` says which came first.
    """
    asked = body or WaitIn()
    return WaitOut(done=memory.wait(asked.cube_id, asked.timeout_s, user_id=user.user_id))


@public.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **JSON_ERRORS},
    summary="Prometheus metrics: requests, latency, search stages, the caller's cubes",
)
def prometheus(request: Request, memory: Memory, user: Caller) -> PlainTextResponse:
    """Request counts and latency and the search stages' durations for the whole server; item
    counts for the caller's cubes."""
    registry = cast(metrics.Metrics, request.app.state.metrics)
    stats: dict[str, Any] = memory.stats(user_id=user.user_id)
    lines = [*registry.lines(), *metrics.stats_lines(stats), *metrics.stage_lines(CLOCK.snapshot())]
    return PlainTextResponse("\n".join(lines) + "\n", media_type=metrics.CONTENT_TYPE)
