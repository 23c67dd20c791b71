"""An item's page and the actions on it, each one ``MemoryOS`` call, refused as the SDK refuses.

``GET …/items/{item_id}``: text, metadata, sources (links to the source items), versions
(``MemoryOS.history``, with a form comparing two: ``diff``) and, for whoever may read the
audit trail, the item's events (``MemoryOS.audit``).  Actions (POST, each with the session's
CSRF token): ``…/rollback`` (``version``) → ``MemoryOS.rollback``; ``…/transition`` (``to``) →
``MemoryOS.transition`` (the page offers the moves ``lifecycle.states.TRANSITIONS`` allows from
the item's state; the core refuses any other); ``…/delete`` → ``MemoryOS.delete``;
``…/erase`` → ``MemoryOS.erase``, only with ``confirm=yes`` (``GET …/erase`` is the confirmation
page, and so is a POST without it).  Done, an action redirects to the item's page (the cube's,
after an erase) with what happened; refused, it shows the core's error.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Response
from fastapi.responses import RedirectResponse

from memstrata.errors import PermissionDenied
from memstrata.lifecycle import states
from memstrata.model import Event, MemoryItem, Source, Version
from memstrata.server.ui import notices, parts
from memstrata.server.ui.diff import version_form
from memstrata.server.ui.markup import Markup, join, table, tag
from memstrata.server.ui.visit import HEADERS, UIRoute, Visit, Visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
PATH = "/ui/cubes/{cube_id}/items/{item_id}"
FormField = Annotated[str, Form()]


@router.get(PATH)
def show(cube_id: str, item_id: str, visit: Visitor, done: str = "", n: str = "") -> Response:
    """The item's page; ``done`` is the code of the action just made (``notices.about_item``;
    ``n``: the version rolled back to)."""
    uid = visit.user.user_id
    item = visit.memory.get(item_id, user_id=uid, cube_id=cube_id)
    versions = visit.memory.history(item_id, user_id=uid, cube_id=cube_id)
    body = [
        notices.about_item(done, n, item),
        parts.cube_tabs(cube_id),
        tag("div", item.text, class_="text"),
        _meta(item),
        tag("h2", "Sources"),
        _sources(item),
        tag("h2", "Cited by"),
        _cited_by(visit, item),
        tag("h2", "Versions"),
        _versions(visit, item, versions),
        _compare(item, versions),
        tag("h2", "Events"),
        _events(visit, item),
        tag("h2", "Actions"),
        _actions(visit, item),
    ]
    return visit.page(f"Memory {item.id}", join(body))


def _meta(item: MemoryItem) -> Markup:
    fields: list[tuple[str, object]] = [
        ("cube", item.cube_id), ("tier", item.tier), ("type", item.type),
        ("status", item.status), ("version", item.version), ("session", item.session_id),
        ("speaker", item.speaker), ("role", item.role), ("user", item.user_id),
        ("external id", item.external_id), ("event time", parts.when(item.event_time)),
        ("updated", parts.when(item.updated_at)), ("keywords", ", ".join(item.keywords)),
        ("tags", ", ".join(item.tags)), ("confidence", item.confidence), ("heat", item.heat),
        ("reads", item.access_count), ("metadata", item.metadata or None),
    ]  # fmt: skip
    pairs = [(tag("dt", k), tag("dd", str(v))) for k, v in fields if v not in (None, "")]
    return tag("dl", *(join(p) for p in pairs), class_="meta")


def _sources(item: MemoryItem) -> Markup:
    return table(["source", "role", "span"], [_source_row(item, s) for s in item.sources])


def _cited_by(visit: Visit, item: MemoryItem) -> Markup:
    """The derived items citing ``item`` (``MemoryOS.cited_by``), linked."""
    found = visit.memory.cited_by(item.id, user_id=visit.user.user_id, cube_id=item.cube_id)
    rows = [
        [tag("a", d.id, href=parts.item_url(d.cube_id, d.id)), d.type, d.status, d.text]
        for d in found
    ]
    return table(["item", "type", "status", "text"], rows)


def _source_row(item: MemoryItem, source: Source) -> list[Markup | str | None]:
    if source.item_id is not None:
        target = tag("a", source.item_id, href=parts.item_url(item.cube_id, source.item_id))
    else:
        target = tag("code", source.uri)
    span = None if source.span is None else f"{source.span[0]}–{source.span[1]}"
    return [target, source.role, span]


def _versions(visit: Visit, item: MemoryItem, versions: list[Version]) -> Markup:
    rows = [
        [v.version, parts.when(v.at), v.actor, v.reason, parts.snippet(v.item.text),
         v.item.status, _rollback(visit, item, v.version)]
        for v in reversed(versions)
    ]  # fmt: skip
    return table(["version", "at", "by", "why", "text", "status", ""], rows)


def _compare(item: MemoryItem, versions: list[Version]) -> Markup:
    """The form comparing two versions (the one before the current and it, to start with)."""
    numbers = [v.version for v in versions]
    if len(numbers) < 2:
        return Markup("")
    return version_form(item.cube_id, item.id, numbers, numbers[-2], numbers[-1])


def _rollback(visit: Visit, item: MemoryItem, version: int) -> Markup:
    if version == item.version:
        return tag("span", "current", class_="muted")
    return _post(visit, item, "rollback", f"Roll back to {version}", version=str(version))


def _post(visit: Visit, item: MemoryItem, action: str, label: str, **fields: str) -> Markup:
    """A one-button form posting ``fields`` (and the CSRF token) to the item's ``action``; red
    for what cannot be undone: delete, erase, a move to a state with no way out."""
    hidden = [tag("input", type="hidden", name=k, value=v) for k, v in fields.items()]
    final = "to" in fields and not states.TRANSITIONS.get(fields["to"], ())
    danger = "danger" if action in ("delete", "erase") or final else None
    return tag(
        "form",
        visit.csrf_field(),
        *hidden,
        tag("button", label, type="submit", class_=danger),
        method="post",
        action=parts.item_url(item.cube_id, item.id, action),
        class_="inline",
    )


def _events(visit: Visit, item: MemoryItem) -> Markup:
    try:
        events = visit.memory.audit(by=visit.user.user_id, item_id=item.id, cube_id=item.cube_id)
    except PermissionDenied as exc:  # the audit trail is for the cube's administrators
        return tag("p", exc.message, class_="muted")
    return event_table(events, item.cube_id)


def event_table(events: list[Event], cube_id: str) -> Markup:
    """Audit events, newest first, with links to the items they touched."""
    rows = [
        [e.seq, parts.when(e.at), e.actor, e.op,
         tag("a", e.item_id, href=parts.item_url(cube_id, e.item_id)) if e.item_id else None,
         e.version, e.reason]
        for e in reversed(events)
    ]  # fmt: skip
    return table(["#", "at", "by", "op", "item", "version", "why"], rows, empty="No event.")


def _actions(visit: Visit, item: MemoryItem) -> Markup:
    """The moves the lifecycle allows from the item's state, then delete and erase."""
    moves = [
        _post(visit, item, "transition", f"Move to {to}", to=to)
        for to in states.TRANSITIONS.get(item.status, ())
    ]
    erase = tag("a", "Erase for good…", href=parts.item_url(item.cube_id, item.id, "erase"))
    return tag("div", *moves, _post(visit, item, "delete", "Delete"), erase, class_="actions")


def _back(cube_id: str, item_id: str, done: str, n: int | None = None) -> Response:
    """Back to the item's page, with the code of what was done (never its words: ``notices``)."""
    where = parts.item_url(cube_id, item_id, done=done, n=n)
    return RedirectResponse(where, 303, headers=HEADERS)


@router.post(PATH + "/rollback")
def rollback(
    cube_id: str, item_id: str, visit: Visitor, version: FormField = "", csrf_token: FormField = ""
) -> Response:
    """``MemoryOS.rollback`` to ``version``."""
    visit.check_csrf(csrf_token)
    number = parts.whole_number(version, "version")
    visit.memory.rollback(item_id, number, user_id=visit.user.user_id, cube_id=cube_id)
    return _back(cube_id, item_id, notices.ROLLED_BACK, number)


@router.post(PATH + "/transition")
def transition(
    cube_id: str, item_id: str, visit: Visitor, to: FormField = "", csrf_token: FormField = ""
) -> Response:
    """``MemoryOS.transition`` to the state ``to`` (the core says which moves are legal)."""
    visit.check_csrf(csrf_token)
    visit.memory.transition(item_id, to, user_id=visit.user.user_id, cube_id=cube_id)
    return _back(cube_id, item_id, notices.MOVED)


@router.post(PATH + "/delete")
def delete(cube_id: str, item_id: str, visit: Visitor, csrf_token: FormField = "") -> Response:
    """``MemoryOS.delete`` (soft: out of search, history kept)."""
    visit.check_csrf(csrf_token)
    visit.memory.delete(item_id, user_id=visit.user.user_id, cube_id=cube_id)
    return _back(cube_id, item_id, notices.DELETED)


@router.get(PATH + "/erase")
def confirm_erase(cube_id: str, item_id: str, visit: Visitor) -> Response:
    """The confirmation page of an erase (nothing is erased yet)."""
    item = visit.memory.get(item_id, user_id=visit.user.user_id, cube_id=cube_id)
    return _confirmation(visit, item)


def _confirmation(visit: Visit, item: MemoryItem) -> Response:
    warning = (
        "Erasing removes this memory's content for good: every version, its index entries and "
        "vectors, and the items derived from it. Only tombstones stay. This cannot be undone."
    )
    body = join([
        tag("p", warning, class_="error"),
        tag("div", item.text, class_="text"),
        tag("div",
            _post(visit, item, "erase", "Yes, erase for good", confirm="yes"),
            tag("a", "Cancel", href=parts.item_url(item.cube_id, item.id)),
            class_="actions"),
    ])  # fmt: skip
    return visit.page(f"Erase {item.id}?", body)


@router.post(PATH + "/erase")
def erase(
    cube_id: str, item_id: str, visit: Visitor, confirm: FormField = "", csrf_token: FormField = ""
) -> Response:
    """``MemoryOS.erase`` of the item once confirmed (``confirm=yes``); else the confirmation."""
    visit.check_csrf(csrf_token)
    uid = visit.user.user_id
    if confirm != "yes":
        return _confirmation(visit, visit.memory.get(item_id, user_id=uid, cube_id=cube_id))
    count = visit.memory.erase(item_id, user_id=uid, cube_id=cube_id)
    where = parts.cube_url(cube_id, done=notices.ERASED, n=count)
    return RedirectResponse(where, 303, headers=HEADERS)
