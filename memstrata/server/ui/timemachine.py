"""``GET /ui/cubes/{cube_id}/as-of?at=…&q=&page=``: the cube as it stood at a past time.

``at`` is what a ``datetime-local`` input sends (``2024-05-08T13:56``, seconds optional), read as
UTC like every time the inspector shows; any ISO 8601 time the core takes works too.  Without
``q``, a page of the cube's items (``MemoryOS.list_memories``, every status, oldest event first)
is shown each as ``MemoryOS.get(as_of=at)`` returns it, the items that did not exist yet left
out; with ``q``, ``MemoryOS.search(as_of=at)`` on the cube, each hit with the parts of its
score.  The core checks the grant and the time (not in the future, not before the cube existed).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memstrata.errors import ItemNotFound
from memstrata.model import STATUSES, MemoryItem, parse_time
from memstrata.server.ui import parts
from memstrata.server.ui.markup import Child, Markup, join, table, tag
from memstrata.server.ui.visit import UIRoute, Visit, Visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
Param = Annotated[str, Query()]


@router.get("/ui/cubes/{cube_id}/as-of")
def as_of(
    cube_id: str, visit: Visitor, at: Param = "", q: Param = "", page: Param = "1"
) -> Response:
    """The form; with ``at``, the cube's memories (or the hits for ``q``) as of that time."""
    cube = visit.memory.get_cube(cube_id, user_id=visit.user.user_id)
    body = [parts.cube_tabs(cube_id), _form(cube_id, at, q)]
    if at:
        shown = parts.when(parse_time(at, "as_of"))
        body.append(tag("p", f"As of {shown} UTC", class_="notice", id="as-of"))
        if q:
            body.append(_hits(visit, cube_id, at, q))
        else:
            body.append(_listing(visit, cube_id, at, parts.page_number(page)))
    else:
        body.append(
            tag("p", "Choose a time (UTC) to see the cube as it stood then.", class_="muted")
        )
    return visit.page(f"Time machine · {cube.name}", join(body))


def _form(cube_id: str, at: str, q: str) -> Markup:
    return tag(
        "form",
        tag("label", "as of (UTC)",
            tag("input", type="datetime-local", name="at", value=at[:19], step=1, required=True)),
        tag("label", "search (optional)", tag("input", type="search", name="q", value=q, size=30)),
        tag("button", "Show", type="submit"),
        method="get",
        action=parts.cube_url(cube_id, "as-of"),
        class_="bar",
    )  # fmt: skip


def _listing(visit: Visit, cube_id: str, at: str, page: int) -> Markup:
    uid = visit.user.user_id
    found = visit.memory.list_memories(
        cube_id,
        user_id=uid,
        filters={"status": list(STATUSES)},
        limit=parts.PAGE + 1,
        offset=(page - 1) * parts.PAGE,
    )
    then: list[MemoryItem] = []
    for item in found[: parts.PAGE]:
        try:
            then.append(visit.memory.get(item.id, user_id=uid, cube_id=cube_id, as_of=at))
        except ItemNotFound:  # not made yet at that time
            continue
    rows: list[list[Child]] = [
        [parts.when(i.event_time), parts.item_link(i), parts.kind(i), i.version] for i in then
    ]
    more = len(found) > parts.PAGE
    pager = parts.pager(page, more, lambda n: parts.cube_url(cube_id, "as-of", at=at, page=n))
    headers = ["event time", "memory then", "kind then", "version then"]
    return join([table(headers, rows, empty="No memory existed yet."), pager])


def _hits(visit: Visit, cube_id: str, at: str, q: str) -> Markup:
    hits = visit.memory.search(
        q, user_id=visit.user.user_id, cube_ids=[cube_id], top_k=parts.PAGE, as_of=at
    )
    rows: list[list[Child]] = [
        [n, f"{h.score:.4f}", parts.score_parts(h), parts.item_link(h.item), parts.kind(h.item),
         h.item.version]
        for n, h in enumerate(hits, 1)
    ]  # fmt: skip
    headers = ["#", "fused score", "score parts", "memory then", "kind then", "version then"]
    return join([tag("h2", f"Search: {q}"), table(headers, rows, empty="No hit.")])
