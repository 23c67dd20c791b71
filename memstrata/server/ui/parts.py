"""Pieces several inspector pages show: links, times, a cube's tabs, an item's one-line summary,
what a hit's score is made of."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from memstrata.errors import ValidationError
from memstrata.limits import MAX_ID_CHARS
from memstrata.model import Hit, MemoryItem, parse_time
from memstrata.server.ui.markup import Markup, join, tag
from memstrata.wire import part_text

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


def score_parts(hit: Hit) -> Markup:
    """The parts of ``hit``'s score, one line each in ``wire.part_text``'s words (the channels'
    ranks and shares, then each boost or penalty with its reason; escaped like any text), or
    a muted "not recorded" for a hit without parts."""
    if not hit.parts:
        return tag("span", "not recorded", class_="muted")
    return join(tag("div", part_text(p)) for p in hit.parts)


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


def time_param(raw: str, name: str) -> datetime | None:
    """A time typed in a form or a query (``datetime-local``'s ``2024-05-08T13:56``, or any ISO
    8601 time; naive means UTC) as UTC, None when empty; ``ValidationError`` naming ``name``
    otherwise (the core's parser, which reads at most 64 characters)."""
    return parse_time(raw.strip(), name) if raw.strip() else None


def name_param(raw: str, name: str) -> str:
    """A name chosen in a form or a query (an op, a user id): one line of at most
    ``MAX_ID_CHARS`` characters, stripped; ``ValidationError`` otherwise."""
    raw = raw.strip()
    if len(raw) > MAX_ID_CHARS or "\n" in raw or "\r" in raw:
        raise ValidationError(f"{name} must be one line of at most {MAX_ID_CHARS} characters")
    return raw


def pager(page: int, more: bool, href: Callable[[int], str]) -> Markup:
    """The page number with links to the previous page (from 2) and, when ``more``, the next;
    ``href(n)`` is the URL of page ``n``."""
    links = []
    if page > 1:
        links.append(tag("a", "← previous", href=href(page - 1)))
    if more:
        links.append(tag("a", "next →", href=href(page + 1)))
    return tag("div", tag("span", f"page {page}", class_="muted"), *links, class_="pages")


def usage_text(usage: Mapping[str, int]) -> str:
    """A cube's LLM usage (``MemoryOS.stats``' running totals) in words."""
    calls, prompt = usage.get("calls", 0), usage.get("prompt_tokens", 0)
    return f"{calls} calls, {prompt} + {usage.get('completion_tokens', 0)} tokens"


def select(name: str, options: Sequence[str], chosen: str, blank: str) -> Markup:
    """A labelled ``<select>`` of ``options`` with ``chosen`` selected; ``blank`` labels the
    empty choice (no filter)."""
    choices = [tag("option", blank, value="", selected=not chosen)]
    choices += [tag("option", o, value=o, selected=o == chosen) for o in options]
    return tag("label", name, tag("select", *choices, name=name))
