"""``GET /ui`` (the cubes the user may read, with their counts) and a cube's memory browser.

The cube list shows each cube's grants (``MemoryOS.grants``) to those the core lets see them
(the cube's administrators); to anyone else that cell stays empty.

The browser (``GET /ui/cubes/{cube_id}``) lists a page of the cube's items with
``MemoryOS.list_memories``, narrowed by tier, type, status and session; with ``q`` it searches
instead (``MemoryOS.search`` on that cube, the same filters) and shows each hit's fused score,
its rank in each channel and the parts its score is made of (``parts.score_parts``: each
channel's share, then each boost or penalty with its reason).  The core checks the grant and validates the filters.  Its first page,
unfiltered, ends with the cube's activity (``activity``: items created per day by tier, LLM
usage).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from memstrata.errors import PermissionDenied
from memstrata.model import ITEM_TYPES, STATUSES, TIERS, Cube, Hit, MemoryItem
from memstrata.server.ui import activity, notices, parts
from memstrata.server.ui.markup import Markup, join, table, tag
from memstrata.server.ui.signin import signin_page
from memstrata.server.ui.visit import SignInRequired, UIRoute, Visit, Visitor, visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
#: The status filter's value for "every status" (the default is the searchable ones).
ANY = "any"

Param = Annotated[str, Query()]


@router.get("/ui")
def home(request: Request) -> Response:
    """The cubes of the signed-in user; the sign-in form to anyone else."""
    try:
        visit = visitor(request)
    except SignInRequired:
        return signin_page(request)
    cubes = visit.memory.list_cubes(user_id=visit.user.user_id)
    stats = visit.memory.stats(user_id=visit.user.user_id)
    rows = [[*_cube_row(c, stats.get(c.cube_id, {})), _grants(visit, c)] for c in cubes]
    headers = ["cube", "name", "owner", "embedder", "items by tier/type", "pending tasks", "LLM"]
    headers.append("grants")
    return visit.page("Cubes", table(headers, rows, empty="You may read no cube yet."))


def _grants(visit: Visit, cube: Cube) -> Markup | None:
    """Who may read, write or administer ``cube``; None when the core refuses to say."""
    try:
        grants = visit.memory.grants(cube.cube_id, by=visit.user.user_id)
    except PermissionDenied:
        return None
    return join(tag("span", f"{g.user_id}: {g.permission}", class_="pill") for g in grants)


def _cube_row(cube: Cube, stat: dict[str, Any]) -> list[Markup | str | int | None]:
    counts = stat.get("items", {})
    llm = parts.usage_text(stat.get("llm_usage", {}))
    items = join(tag("span", f"{k}: {n}", class_="pill") for k, n in sorted(counts.items()))
    link = tag("a", cube.cube_id, href=parts.cube_url(cube.cube_id))
    pending = stat.get("pending_tasks", 0)
    return [link, cube.name, cube.owner, cube.embedder, items or "empty", pending, llm]


@router.get("/ui/cubes/{cube_id}")
def browse(
    cube_id: str,
    visit: Visitor,
    tier: Param = "",
    type: Param = "",
    status: Param = "",
    session: Param = "",
    since: Param = "",
    until: Param = "",
    q: Param = "",
    page: Param = "1",
    done: Param = "",
    n: Param = "",
) -> Response:
    """A page of the cube's memories, or the hits for ``q``, narrowed by the filters (``since``
    and ``until``: event times, a date or an ISO time, as the core parses them); ``done`` is the
    code of an action just made (``notices.about_cube``; ``n``: how many items it erased)."""
    cube = visit.memory.get_cube(cube_id, user_id=visit.user.user_id)
    chosen = {"tier": tier, "type": type, "status": status, "session": session,
              "since": since, "until": until}  # fmt: skip
    filters = _filters(chosen)
    body = [notices.about_cube(done, n), _header(cube), _filter_form(cube_id, chosen, q)]
    if q:
        body.append(_hits(visit, cube_id, q, filters))
    else:
        number = parts.page_number(page)
        body.append(_listing(visit, cube_id, filters, chosen, number))
        if number == 1 and not filters:  # the cube as a whole: its activity
            body.append(activity.section(visit, cube_id))
    return visit.page(f"Cube {cube.name}", join(body))


def _filters(chosen: dict[str, str]) -> dict[str, Any]:
    """The form's choices as ``MemoryOS`` filters (the core validates them)."""
    filters: dict[str, Any] = {}
    for key in ("tier", "type"):
        if chosen[key]:
            filters[key] = chosen[key]
    if chosen["status"]:
        filters["status"] = list(STATUSES) if chosen["status"] == ANY else chosen["status"]
    if chosen["session"]:
        filters["session_id"] = chosen["session"]
    if chosen["since"]:
        filters["since"] = chosen["since"]
    if chosen["until"]:  # a day alone (the date picker's) includes that whole day
        until = chosen["until"]
        filters["until"] = f"{until}T23:59:59.999999Z" if len(until) == 10 else until
    return filters


def _header(cube: Cube) -> Markup:
    facts = f"id {cube.cube_id} · owner {cube.owner} · embedder {cube.embedder or '?'}"
    return join([tag("p", facts, class_="muted"), parts.cube_tabs(cube.cube_id)])


def _filter_form(cube_id: str, chosen: dict[str, str], q: str) -> Markup:
    return tag(
        "form",
        tag("label", "search", tag("input", type="search", name="q", value=q, size=40)),
        parts.select("tier", TIERS, chosen["tier"], "every tier"),
        parts.select("type", ITEM_TYPES, chosen["type"], "every type"),
        parts.select("status", (*STATUSES, ANY), chosen["status"], "searchable"),
        tag("label", "session", tag("input", name="session", value=chosen["session"], size=12)),
        tag("label", "since", tag("input", type="date", name="since", value=chosen["since"])),
        tag("label", "until", tag("input", type="date", name="until", value=chosen["until"])),
        tag("button", "Show", type="submit"),
        method="get",
        action=parts.cube_url(cube_id),
        class_="bar",
    )


def _listing(
    visit: Visit, cube_id: str, filters: dict[str, Any], chosen: dict[str, str], page: int
) -> Markup:
    found = visit.memory.list_memories(
        cube_id,
        user_id=visit.user.user_id,
        filters=filters,
        limit=parts.PAGE + 1,
        offset=(page - 1) * parts.PAGE,
    )
    shown, more = found[: parts.PAGE], len(found) > parts.PAGE
    rows = [_item_row(i) for i in shown]
    headers = ["event time", "memory", "kind", "session", "speaker"]
    pager = parts.pager(page, more, lambda n: parts.cube_url(cube_id, **chosen, page=n))
    return join([table(headers, rows, empty="No memory matches."), pager])


def _item_row(item: MemoryItem) -> list[Markup | str | None]:
    when = parts.when(item.event_time)
    return [when, parts.item_link(item), parts.kind(item), item.session_id, item.speaker]


def _hits(visit: Visit, cube_id: str, q: str, filters: dict[str, Any]) -> Markup:
    hits = visit.memory.search(
        q, user_id=visit.user.user_id, cube_ids=[cube_id], top_k=parts.PAGE, filters=filters
    )
    rows = [_hit_row(n, h) for n, h in enumerate(hits, 1)]
    headers = ["#", "fused score", "channel ranks", "score parts", "memory", "kind"]
    return join([tag("h2", f"Search: {q}"), table(headers, rows, empty="No hit.")])


def _hit_row(rank: int, hit: Hit) -> list[Markup | str | int]:
    channels = join(
        tag("span", f"{name} #{place}", class_="pill") for name, place in sorted(hit.ranks.items())
    )
    item = hit.item
    why = parts.score_parts(hit)
    return [rank, f"{hit.score:.4f}", channels, why, parts.item_link(item), parts.kind(item)]
