"""A cube's activity, on its page: the items created per day in each tier, and its LLM usage.

``section`` reads the cube's searchable items (``MemoryOS.list_memories`` with no filter: the
items the cube list counts), ``MAX_TOP_K`` at a time and at most ``MAX_ITEMS``, and counts them
by the UTC day of their ``created_at`` and the tier each is in now (a turn folded into a
segment has moved from the working tier to the mid tier), drawn by ``charts.bars`` for every
day from the first to the last with an item, the latest ``DAYS`` at most.  The page says when
items were left out (older days, or past ``MAX_ITEMS``).

The LLM usage is ``MemoryOS.stats``' running totals: the core counts calls and tokens per cube,
not per day, so they are shown as totals, with no chart over time.
"""

from __future__ import annotations

from datetime import timezone

from memstrata.limits import MAX_TOP_K
from memstrata.model import TIERS, MemoryItem
from memstrata.server.ui import charts, parts
from memstrata.server.ui.markup import Markup, join, tag
from memstrata.server.ui.visit import Visit

#: The most items the chart reads (in ``MAX_TOP_K`` pages, oldest event first).
MAX_ITEMS = 5 * MAX_TOP_K
#: The most days the chart shows (the latest ones).
DAYS = 60


def section(visit: Visit, cube_id: str) -> Markup:
    """The cube's activity: the chart of items created per day by tier and the LLM totals."""
    items, complete = _items(visit, cube_id)
    days = charts.by_day(
        ((i.created_at.astimezone(timezone.utc).date(), i.tier) for i in items), TIERS, DAYS
    )
    notes = [f"{len(items)} searchable items, counted by the day (UTC) each was created, in the "
             "tier it is in now."]  # fmt: skip
    if days.earlier:
        notes.append(f"{days.earlier} created before {days.labels[0]} are left out.")
    if not complete:
        notes.append(f"Only the first {MAX_ITEMS} items (oldest event first) are counted.")
    body = [tag("h2", "Activity")]
    if items:
        desc = f"{len(items)} items over {len(days.labels)} days, stacked by tier."
        body.append(charts.bars("tiers-by-day", "Items created per day, by tier", "day",
                                days.labels, days.counts, desc))  # fmt: skip
    body.append(tag("p", " ".join(notes), class_="muted"))
    usage = visit.memory.stats(user_id=visit.user.user_id, cube_id=cube_id)[cube_id]["llm_usage"]
    body.append(tag("p", f"LLM usage, totals so far: {parts.usage_text(usage)} "
                         "(the core counts them per cube, not per day).", id="llm-usage"))  # fmt: skip
    return join(body)


def _items(visit: Visit, cube_id: str) -> tuple[list[MemoryItem], bool]:
    """The cube's searchable items, at most ``MAX_ITEMS``; and whether that is all of them."""
    found: list[MemoryItem] = []
    while len(found) < MAX_ITEMS:
        page = visit.memory.list_memories(
            cube_id, user_id=visit.user.user_id, limit=MAX_TOP_K, offset=len(found)
        )
        found += page
        if len(page) < MAX_TOP_K:
            return found, True
    more = visit.memory.list_memories(
        cube_id, user_id=visit.user.user_id, limit=1, offset=len(found)
    )
    return found, not more
