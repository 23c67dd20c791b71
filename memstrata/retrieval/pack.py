"""Context packing: the best memories that fit a token budget, rendered for a prompt.

The rendered context is plain text in sections, each line dated and attributed::

    # Profile
    Caroline lives in Boston
    # Recent conversation
    [2024-05-08] Caroline: I went to the support group yesterday.
    # Relevant memories
    [2023-05-07] Melanie: We painted a sunrise by the lake.
    [2023-06-01] (topic) hiking · alps · hut: We went hiking in the Alps … / …

*Profile* holds the current profile attributes (always first: they are the cheapest context);
*Recent conversation* holds the current session's working turns (newest kept first when they
do not all fit), *Relevant memories* the search hits in rank order until the budget is spent,
shown in time order.  A hit on a derived item (a segment) is shown as ``(topic)`` with its
keywords and summary, and its ``sources`` stay in the structured result.  Sections are left out
when empty.

Stored content cannot forge a line of this format: every field shown (speaker or role, keywords,
text, profile lines) is put on one line (``text.one_line``: line breaks and control characters
become spaces), a speaker or keyword is cut at ``limits.MAX_NAME`` characters, and a profile line
loses any leading ``#`` or ``[``.  So each line is a header, a memory starting with its date, or
a profile line, whatever the memories say.

Tokens are counted offline as whitespace-separated words × 1.3, rounded up — the measure the
LoCoMo baselines use — where a word longer than ``WORD_CHARS`` characters counts once per
``WORD_CHARS`` (so text without spaces, a long name or a CJK run, is not nearly free).  Every
character of the rendered text is counted, speakers and headers included, and the text never
exceeds the budget: a budget of N tokens holds at most about 10 × N characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memstrata.limits import MAX_NAME
from memstrata.model import Hit, MemoryItem
from memstrata.text import WORD_CHARS, count_tokens, one_line

__all__ = ["HEADERS", "WORD_CHARS", "Context", "count_tokens", "pack", "render"]

HEADERS = {
    "profile": "# Profile",
    "recent": "# Recent conversation",
    "hits": "# Relevant memories",
}


def render(item: MemoryItem) -> str:
    """One context line for an item: date (and, for one that stopped holding, "until" the
    date it did), who said it (a long-tier item: whose memory it is and its type; a segment:
    its keywords), text."""
    when = item.event_time.date().isoformat()
    if item.valid_to is not None:  # it stopped holding (superseded): say until when
        when += f", until {item.valid_to.date().isoformat()}"
    if item.type == "segment":
        topic = " · ".join(one_line(k, MAX_NAME) for k in item.keywords[:4])
        return f"[{when}] (topic) {topic}: {one_line(item.text)}"
    if item.tier == "long":
        # A derived memory is about someone, not said by them: name whose it is, and what.
        subject = one_line(str(item.metadata.get("subject") or ""), MAX_NAME) or "user"
        return f"[{when}] {subject} ({item.type}): {one_line(item.text)}"
    who = one_line(item.speaker or item.role or "", MAX_NAME) or "someone"
    return f"[{when}] {who}: {one_line(item.text)}"


def profile_line(line: str) -> str:
    """A profile line as shown: one line, not starting with ``#`` or ``[`` ("" if nothing is
    left)."""
    return one_line(line).lstrip("#[ ")


@dataclass(frozen=True)
class Context:
    """A packed context: the ``text`` to put in a prompt and what it holds."""

    text: str
    tokens: int
    budget: int
    #: the hits packed, in rank order, with their scores and sources
    hits: list[Hit] = field(default_factory=list)
    #: the working turns packed, oldest first
    recent: list[MemoryItem] = field(default_factory=list)
    #: the profile lines packed
    profile: list[str] = field(default_factory=list)

    @property
    def items(self) -> list[MemoryItem]:
        """Every item in the context (recent turns first)."""
        return [*self.recent, *(h.item for h in self.hits)]


def pack(
    hits: Sequence[Hit],
    recent: Sequence[MemoryItem],
    budget: int,
    profile: Sequence[str] = (),
) -> Context:
    """Fill ``budget`` tokens: the profile lines, recent turns (newest first), then hits in rank
    order.  Items already packed as recent turns are not repeated among the hits.
    """
    used = 0
    kept_profile: list[str] = []
    for line in filter(None, map(profile_line, profile)):
        cost = count_tokens(line) + (0 if kept_profile else count_tokens(HEADERS["profile"]))
        if used + cost <= budget:
            kept_profile.append(line)
            used += cost
    kept_recent: list[MemoryItem] = []
    for item in reversed(recent):
        cost = count_tokens(render(item)) + (0 if kept_recent else count_tokens(HEADERS["recent"]))
        if used + cost > budget:
            break
        kept_recent.append(item)
        used += cost
    seen = {i.id for i in kept_recent}
    kept_hits: list[Hit] = []
    for hit in hits:
        if hit.item.id in seen:
            continue
        cost = count_tokens(render(hit.item)) + (0 if kept_hits else count_tokens(HEADERS["hits"]))
        if used + cost > budget:
            continue  # a shorter item further down may still fit
        kept_hits.append(hit)
        seen.add(hit.item.id)
        used += cost
    kept_recent.reverse()
    sections = []
    if kept_profile:
        sections.append([HEADERS["profile"], *kept_profile])
    if kept_recent:
        sections.append([HEADERS["recent"], *map(render, kept_recent)])
    if kept_hits:
        by_time = sorted((h.item for h in kept_hits), key=lambda i: (i.event_time, i.id))
        sections.append([HEADERS["hits"], *map(render, by_time)])
    text = "\n".join(line for section in sections for line in section)
    return Context(text, count_tokens(text), budget, kept_hits, kept_recent, kept_profile)
