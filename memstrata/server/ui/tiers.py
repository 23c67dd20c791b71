"""``GET /ui/cubes/{cube_id}/tiers``: a cube's three tiers, each read with the SDK's calls.

* working: the turns of the working tier (``MemoryOS.list_memories``, tier ``working``, type
  ``turn``), grouped by session;
* mid: the active segments (tier ``mid``, type ``segment``): a histogram of their heat
  (``charts.histogram``: ``HEAT_BINS`` equal bins from zero to the hottest), then each, hottest
  first, with its heat and what it is made of (visits, pages, last visit: the core stores the
  heat, not its three terms), keywords, summary and page chain (``sources``, links to the pages);
* long: the current profile with its evidence (``MemoryOS.get_profile``), then the preferences
  and facts (tier ``long``) with the items they came from.

At most ``MAX_TOP_K`` items of each kind are shown; the core checks the grant.
"""

from __future__ import annotations

from itertools import groupby

from fastapi import APIRouter, Response

from memstrata.limits import MAX_TOP_K
from memstrata.model import MemoryItem, ProfileAttribute
from memstrata.server.ui import charts, parts
from memstrata.server.ui.markup import Markup, join, table, tag
from memstrata.server.ui.visit import UIRoute, Visit, Visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
#: The three terms of a segment's heat, as the core computes it (memstrata.tiers.mid.heat).
HEAT = "heat = α·visits + β·pages + γ·exp(−Δt/τ), Δt since the last visit or change"
#: Bins of the heat histogram.
HEAT_BINS = 10


@router.get("/ui/cubes/{cube_id}/tiers")
def tiers(cube_id: str, visit: Visitor) -> Response:
    """The working turns by session, the mid-tier segments and the long tier."""
    cube = visit.memory.get_cube(cube_id, user_id=visit.user.user_id)
    segments = _items(visit, cube_id, "mid", "segment")
    body = [
        parts.cube_tabs(cube_id),
        tag("h2", "Working tier: turns by session"),
        _working(_items(visit, cube_id, "working", "turn")),
        tag("h2", "Mid tier: segments, hottest first"),
        tag("p", HEAT, class_="muted"),
        _heat_chart(segments),
        _segments(segments),
        tag("h2", "Long tier: profile"),
        _profile(visit.memory.get_profile(user_id=visit.user.user_id, cube_id=cube_id)),
    ]
    for kind in ("preference", "fact"):
        body += [tag("h2", f"Long tier: {kind}s"), _derived(_items(visit, cube_id, "long", kind))]
    return visit.page(f"Tiers · {cube.name}", join(body))


def _items(visit: Visit, cube_id: str, tier: str, kind: str) -> list[MemoryItem]:
    return visit.memory.list_memories(
        cube_id, user_id=visit.user.user_id, filters={"tier": tier, "type": kind}, limit=MAX_TOP_K
    )


def _working(turns: list[MemoryItem]) -> Markup:
    if not turns:
        return tag("p", "No turn in the working tier.", class_="empty")
    ordered = sorted(turns, key=lambda t: (t.session_id or "", t.event_time, t.id))
    sections = []
    for session, group in groupby(ordered, key=lambda t: t.session_id or ""):
        rows = [[parts.when(t.event_time), t.speaker or t.role, parts.item_link(t)] for t in group]
        sections.append(tag("h3", f"session {session}" if session else "no session"))
        sections.append(table(["event time", "speaker", "turn"], rows))
    return join(sections)


def _heat_chart(segments: list[MemoryItem]) -> Markup:
    """The histogram of the segments' heat (``HEAT_BINS`` bins); nothing without a heat."""
    heats = [s.heat for s in segments if s.heat is not None]
    if not heats:
        return Markup("")
    labels, counts = charts.histogram(heats, HEAT_BINS)
    desc = f"{len(heats)} segments by heat, from {min(heats):.3f} to {max(heats):.3f}, "
    desc += f"in {len(labels)} bins of equal width; the fullest holds {max(counts)}."
    return charts.bars("heat", "Segments by heat", "heat", labels, {"segments": counts}, desc)


def _segments(segments: list[MemoryItem]) -> Markup:
    hottest = sorted(segments, key=lambda s: -(s.heat or 0.0))
    rows = [
        [f"{s.heat:.3f}" if s.heat is not None else None, s.access_count, len(s.sources),
         parts.when(s.last_accessed_at or s.updated_at), ", ".join(s.keywords),
         parts.item_link(s), _chain(s)]
        for s in hottest
    ]  # fmt: skip
    headers = ["heat", "visits", "pages", "last visit", "keywords", "summary", "page chain"]
    return table(headers, rows, empty="No segment in the mid tier.")


def _chain(item: MemoryItem) -> Markup:
    """Links to the items ``item`` came from, in order (a segment's pages, a fact's turns)."""
    links = [
        tag("a", f"#{n}", href=parts.item_url(item.cube_id, s.item_id), title=s.item_id)
        for n, s in enumerate(item.sources, 1)
        if s.item_id
    ]
    return join(links, " → ")


def _profile(attributes: list[ProfileAttribute]) -> Markup:
    rows = [
        [a.subject, a.key, a.value, parts.when(a.since),
         tag("a", a.text, href=parts.item_url(a.cube_id, a.item_id)),
         join((tag("a", f"#{n}", href=parts.item_url(a.cube_id, e), title=e)
               for n, e in enumerate(a.evidence, 1)), " ")]
        for a in attributes
    ]  # fmt: skip
    headers = ["subject", "key", "value", "since", "attribute", "evidence"]
    return table(headers, rows, empty="No profile attribute yet.")


def _derived(items: list[MemoryItem]) -> Markup:
    rows = [[parts.item_link(i), i.confidence, _chain(i)] for i in items]
    return table(["memory", "confidence", "evidence"], rows, empty="None yet.")
