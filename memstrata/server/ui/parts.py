"""Pieces several inspector pages show: links, times, a cube's tabs, an item's one-line summary."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from memstrata.errors import ValidationError
from memstrata.model import MemoryItem
from memstrata.server.ui.markup import Markup, join, tag

#: Items per page of the memory browser (and hits per search).
PAGE = 50
#: Characters of an item's text shown in a list before it is cut.
SNIPPET = 160


def url(*path: str, **query: Any) -> str:
    """``/ui/…`` with each path segment quoted and the non-empty ``query`` values encoded."""
    base = "/ui/" + "/".join(quote(p, safe="") for p in path)
    params = {k: v for k, v in query.items() if v not in (None, "")}
    return f"{base}?{urlencode(params)}" if params else base


def cube_url(cube_id: str, *rest: str, **query: Any) -> str:
    """The URL of a cube's page, or of a page under it (``items``, ``audit``…)."""
    return url("cubes", cube_id, *rest, **query)


def item_url(cube_id: str, item_id: str, *rest: str, **query: Any) -> str:
    """The URL of an item's page (or of an action on it)."""
    return cube_url(cube_id, "items", item_id, *rest, **query)


def when(at: datetime | None) -> str:
    """A time as shown on the pages: UTC to the second."""
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M:%S")


def snippet(text: str) -> str:
    """``text`` cut to ``SNIPPET`` characters (with an ellipsis when cut)."""
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def item_link(item: MemoryItem) -> Markup:
    """A link to ``item``'s page, labelled with the start of its text."""
    return tag("a", snippet(item.text) or item.id, href=item_url(item.cube_id, item.id))


def kind(item: MemoryItem) -> Markup:
    """The item's tier, type and status as small labels."""
    return join(tag("span", v, class_="pill") for v in (item.tier, item.type, item.status))


def cube_tabs(cube_id: str) -> Markup:
    """Links to a cube's pages."""
    links = [
        ("Memories", cube_url(cube_id)),
        ("Tiers", cube_url(cube_id, "tiers")),
        ("Time machine", cube_url(cube_id, "as-of")),
        ("Context preview", cube_url(cube_id, "context")),
        ("Audit", cube_url(cube_id, "audit")),
        ("Tasks", url("tasks", cube=cube_id)),
    ]
    return tag("p", join((tag("a", label, href=href) for label, href in links), " · "))


def whole_number(raw: str, name: str, minimum: int = 0) -> int:
    """A number typed in a form or a query (ASCII digits, at most 9 of them, from ``minimum``);
    ``ValidationError`` otherwise: ``int()`` would take "²" for no number and 5,000 digits for
    an error, both a 500 instead of a clear 422."""
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or int(raw) < minimum:
        raise ValidationError(f"{name} must be a whole number from {minimum}, not {raw[:20]!r}")
    return int(raw)


def page_number(raw: str) -> int:
    """A ``page`` query value as a number from 1; ``ValidationError`` otherwise."""
    return whole_number(raw, "page", 1)
