"""A cube's activity, on its page: the items created per day in each tier, and its LLM usage.

``section`` reads the cube's searchable items (``MemoryOS.list_memories`` with no filter: the
items the cube list counts), ``MAX_TOP_K`` at a time and at most ``MAX_ITEMS``, and counts them
by the UTC day of their ``created_at`` and the tier each is in now (a turn folded into a
segment has moved from the working tier to the mid tier), drawn by ``charts.bars`` for every
day from the first to the last with an item, the latest ``DAYS`` at most.  The page says when
items were left out (older days, or past ``MAX_ITEMS``).

The LLM usage is ``MemoryOS.stats``' running totals and ``MemoryOS.llm_usage_by_day``: calls and
tokens (prompt and completion stacked) per UTC day over the last ``USAGE_DAYS`` days, every day
from the first with a call to today.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from memstrata.limits import MAX_TOP_K
from memstrata.model import TIERS, MemoryItem
from memstrata.server.ui import charts, parts
from memstrata.server.ui.markup import Markup, join, tag
from memstrata.server.ui.visit import Visit

#: The most items the chart reads (in ``MAX_TOP_K`` pages, oldest event first).
MAX_ITEMS = 5 * MAX_TOP_K
#: The most days the chart shows (the latest ones).
DAYS = 60
#: The days the LLM usage charts cover (up to today).
USAGE_DAYS = 30


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
    body.append(tag("p", f"LLM usage, totals so far: {parts.usage_text(usage)}.", id="llm-usage"))
    body.append(_usage_charts(visit, cube_id))
    return join(body)


def _usage_charts(visit: Visit, cube_id: str) -> Markup:
    """Calls and tokens per day over the last ``USAGE_DAYS`` days (nothing when none)."""
    found = dict(
        visit.memory.llm_usage_by_day(cube_id, user_id=visit.user.user_id, days=USAGE_DAYS)
    )
    if not found:
        return Markup("")
    today = datetime.now(timezone.utc).date()
    first = min(date.fromisoformat(d) for d in found)
    labels = [(first + timedelta(days=n)).isoformat() for n in range((today - first).days + 1)]
    zero = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    daily = [found.get(day, zero) for day in labels]
    calls = charts.bars("llm-calls", "LLM calls per day", "day", labels,
                        {"calls": [u["calls"] for u in daily]},
                        f"{sum(u['calls'] for u in daily)} calls over {len(labels)} days.")  # fmt: skip
    tokens = charts.bars(
        "llm-tokens", "LLM tokens per day", "day", labels,
        {"prompt": [u["prompt_tokens"] for u in daily],
         "completion": [u["completion_tokens"] for u in daily]},
        "Prompt and completion tokens stacked, per day.",
    )  # fmt: skip
    return join([calls, tokens])


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
