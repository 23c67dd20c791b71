"""A cube's context preview, and the background tasks.

``GET /ui/cubes/{cube_id}/context`` packs ``MemoryOS.context`` for a query and a token budget
and shows the text exactly as a model gets it; ``GET /ui/tasks`` is ``MemoryOS.tasks``
(every cube the user may read, or ``cube``; ``status`` narrows it), with a retry button on each
failed task the core would let the user retry (``MemoryOS.may_retry``).  ``POST
/ui/tasks/{task_id}/retry`` (with the session's CSRF token) is ``MemoryOS.retry_task``, refused
as the SDK refuses; done, it redirects to the tasks page saying where the task stands.
"""

from __future__ import annotations

from typing import Annotated, cast, get_args

from fastapi import APIRouter, Form, Query, Response
from fastapi.responses import RedirectResponse

from memstrata.errors import ValidationError
from memstrata.scheduler import Task, TaskStatus
from memstrata.server.ui import notices, parts
from memstrata.server.ui.markup import Markup, join, table, tag
from memstrata.server.ui.visit import HEADERS, UIRoute, Visit, Visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
Param = Annotated[str, Query()]
#: The budget the context preview starts with, in tokens.
BUDGET = 1000
#: Task states offered by the tasks page's filter.
TASK_STATES: tuple[str, ...] = get_args(TaskStatus)


@router.get("/ui/cubes/{cube_id}/context")
def context(
    cube_id: str, visit: Visitor, q: Param = "", budget: Param = str(BUDGET), session: Param = ""
) -> Response:
    """The form; with ``q``, the context packed for it within ``budget`` tokens."""
    cube = visit.memory.get_cube(cube_id, user_id=visit.user.user_id)
    form = tag(
        "form",
        tag("label", "query", tag("input", type="search", name="q", value=q, size=40)),
        tag("label", "budget (tokens)", tag("input", name="budget", value=budget, size=6)),
        tag("label", "session", tag("input", name="session", value=session, size=12)),
        tag("button", "Pack", type="submit"),
        method="get",
        action=parts.cube_url(cube_id, "context"),
        class_="bar",
    )
    body = [parts.cube_tabs(cube_id), form]
    if q:
        packed = visit.memory.context(
            q,
            user_id=visit.user.user_id,
            budget_tokens=parts.whole_number(budget, "budget"),
            cube_ids=[cube_id],
            session_id=session or None,
        )
        used = f"{packed.tokens} of {packed.budget} tokens · {len(packed.hits)} memories"
        used += f" · {len(packed.recent)} recent turns · {len(packed.profile)} profile lines"
        hits = [[parts.item_link(h.item), f"{h.score:.4f}"] for h in packed.hits]
        body += [
            tag("p", used, class_="muted"),
            tag("pre", packed.text, class_="context"),
            tag("h2", "Memories packed"),
            table(["memory", "fused score"], hits),
        ]
    return visit.page(f"Context preview · {cube.name}", join(body))


@router.get("/ui/tasks")
def tasks(
    visit: Visitor, cube: Param = "", status: Param = "", done: Param = "", task: Param = ""
) -> Response:
    """Recent background tasks, newest first, with their errors; ``done`` is the code of the
    action just made (``notices.about_tasks``; ``task``: the task retried)."""
    if status and status not in TASK_STATES:
        raise ValidationError(f"status must be one of {', '.join(TASK_STATES)}")
    found = visit.memory.tasks(
        user_id=visit.user.user_id,
        cube_id=cube or None,
        status=cast(TaskStatus, status) if status else None,
    )
    rows = [
        [t.kind, tag("a", t.cube_id, href=parts.cube_url(t.cube_id)) if t.cube_id else None,
         t.status, f"{t.attempts}/{t.max_attempts}", parts.when(t.created_at),
         parts.when(t.updated_at), t.error, _retry(visit, t)]
        for t in found
    ]  # fmt: skip
    headers = ["kind", "cube", "status", "attempts", "created", "updated", "error", ""]
    links = [tag("a", s, href=parts.url("tasks", cube=cube, status=s)) for s in TASK_STATES]
    filters = tag("p", "show: ", tag("a", "all", href=parts.url("tasks", cube=cube)), " · ",
                  join(links, " · "))  # fmt: skip
    notice = notices.about_tasks(done, task, found)
    return visit.page("Tasks", join([notice, filters, table(headers, rows, empty="No task.")]))


def _retry(visit: Visit, task: Task) -> Markup | None:
    """The retry button of a task the core would let this user retry; else nothing."""
    if not visit.memory.may_retry(task, user_id=visit.user.user_id):
        return None
    return tag(
        "form",
        visit.csrf_field(),
        tag("button", "Retry", type="submit"),
        method="post",
        action=parts.url("tasks", task.task_id, "retry"),
        class_="inline",
    )


@router.post("/ui/tasks/{task_id}/retry")
def retry(task_id: str, visit: Visitor, csrf_token: Annotated[str, Form()] = "") -> Response:
    """``MemoryOS.retry_task``, then back to the tasks page saying where the task stands."""
    visit.check_csrf(csrf_token)
    task = visit.memory.retry_task(task_id, user_id=visit.user.user_id)
    where = parts.url("tasks", done=notices.RETRIED, task=task.task_id)
    return RedirectResponse(where, 303, headers=HEADERS)
