"""``GET /ui/cubes/{cube_id}/audit?op=&actor=&from=&to=&page=``: a cube's audit trail, filtered.

The events are ``MemoryOS.audit`` of the cube, as ``GET /audit`` reads them: the cube's
administrators only (the core refuses anyone else), from ``from`` on (the core's ``since``), at
most ``MAX_AUDIT_LIMIT`` of them, oldest first.  The core filters by nothing else, so the page
narrows what it returned by ``op`` (the event's kind: ``create``, ``update``, ``transition``…),
``actor`` (who acted) and ``to`` (at or before), then shows them newest first, ``PAGE`` at a time;
it says when the core's limit cut the read short (a later ``from`` reaches the events after).
``from`` and ``to`` are times in UTC (what a ``datetime-local`` input sends, or ISO 8601); the
choices of ``op`` and ``actor`` are those of the events read.  Every value is parsed by
``parts`` (bounded): a bad one is a 422.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from memstrata.limits import MAX_AUDIT_LIMIT
from memstrata.model import Event
from memstrata.server.ui import parts
from memstrata.server.ui.items import event_table
from memstrata.server.ui.markup import Markup, join, tag
from memstrata.server.ui.visit import UIRoute, Visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
Param = Annotated[str, Query()]


@router.get("/ui/cubes/{cube_id}/audit")
def audit(
    cube_id: str,
    visit: Visitor,
    op: Param = "",
    actor: Param = "",
    since: Annotated[str, Query(alias="from")] = "",
    until: Annotated[str, Query(alias="to")] = "",
    page: Param = "1",
) -> Response:
    """The cube's events passing the filters, newest first, a page at a time."""
    chosen = {"op": parts.name_param(op, "op"), "actor": parts.name_param(actor, "actor"),
              "from": since.strip(), "to": until.strip()}  # fmt: skip
    start, end = parts.time_param(since, "from"), parts.time_param(until, "to")
    number = parts.page_number(page)
    cube = visit.memory.get_cube(cube_id, user_id=visit.user.user_id)
    events = visit.memory.audit(
        by=visit.user.user_id, cube_id=cube_id, since=start, limit=MAX_AUDIT_LIMIT
    )
    kept = [e for e in events if _passes(e, chosen["op"], chosen["actor"], end)]
    shown = kept[max(0, len(kept) - number * parts.PAGE) : len(kept) - (number - 1) * parts.PAGE]
    more = len(kept) > number * parts.PAGE
    body = [
        parts.cube_tabs(cube_id),
        _form(cube_id, chosen, events),
        tag("p", _summary(len(kept), events, chosen["from"]), class_="muted"),
        event_table(shown, cube_id),
        parts.pager(number, more, lambda n: parts.cube_url(cube_id, "audit", **chosen, page=n)),
    ]
    return visit.page(f"Audit · {cube.name}", join(body))


def _passes(event: Event, op: str, actor: str, end: datetime | None) -> bool:
    return (
        (not op or event.op == op)
        and (not actor or event.actor == actor)
        and (end is None or event.at <= end)
    )


def _summary(kept: int, events: list[Event], start: str) -> str:
    said = f"{kept} of the {len(events)} events read match, newest first."
    if len(events) == MAX_AUDIT_LIMIT:
        said += (
            f" The core returns at most {MAX_AUDIT_LIMIT} events, oldest first, so later ones "
            f"were not read: set 'from' to {parts.when(events[-1].at)} (the last one read) or "
            "later to see them."
        )
    elif not start:
        said += " Every event of the cube was read."
    return said


def _form(cube_id: str, chosen: dict[str, str], events: list[Event]) -> Markup:
    ops = sorted({e.op for e in events} | ({chosen["op"]} - {""}))
    actors = sorted({e.actor for e in events if e.actor} | ({chosen["actor"]} - {""}))

    def moment(name: str) -> Markup:
        field = tag("input", type="datetime-local", name=name, value=chosen[name][:19], step=1)
        return tag("label", f"{name} (UTC)", field)

    return tag(
        "form",
        parts.select("op", ops, chosen["op"], "every op"),
        parts.select("actor", actors, chosen["actor"], "anyone"),
        moment("from"),
        moment("to"),
        tag("button", "Show", type="submit"),
        method="get",
        action=parts.cube_url(cube_id, "audit"),
        class_="bar",
    )
