"""The bodies of ``POST /search``: the request, and the hits it answers with their parts when
asked (``explain``).

Kept apart from ``schemas`` (which they build on) for its size.  The default answer is the
same as before hits had parts: ``parts`` is left out of every hit unless ``explain`` is true
(the route serializes with ``exclude_unset``, and ``ExplainedHitOut.of_hit`` only sets
``parts`` when they were asked for), so the common call pays nothing for explanations.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from memstrata import wire
from memstrata.limits import MAX_CUBE_IDS, MAX_QUERY_CHARS, MAX_TOP_K
from memstrata.memory.kinds import SearchInclude
from memstrata.model import Hit, PartKind
from memstrata.server.schemas import HitOut, _Body, _Out, _user_field


class SearchIn(_Body):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    cube_ids: list[str] | None = Field(
        default=None,
        max_length=MAX_CUBE_IDS,
        validation_alias=AliasChoices("cube_ids", "install_cube_ids"),
        description="Default: every cube the caller may read.",
    )
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    filters: dict[str, Any] | None = Field(
        default=None,
        description="session_id, tier, type, status, since, until, metadata (see docs/search.md).",
    )
    include: list[SearchInclude] | None = Field(
        default=None,
        description="Also search items in these states (left out by default); the kinds of "
        "memory to search: text (the default), tool, skill (docs/tools-skills.md).",
    )
    as_of: datetime | None = Field(
        default=None,
        description="Search the memory as it stood then (ISO 8601 or epoch seconds; slower).",
    )
    explain: bool = Field(
        default=False,
        description="Give each hit its parts: what its score is made of (docs/search.md).",
    )
    user_id: str | None = _user_field()


class PartOut(_Out):
    """One part of a hit's score; a hit's parts' values sum to its score."""

    kind: PartKind = Field(description="channel: a channel's share; adjustment: a boost or cut.")
    name: str = Field(description="The channel (keyword, dense…) or the adjustment (neighbour…).")
    value: float = Field(description="What it adds to the score (negative: takes away).")
    reason: str = Field(description='Why, in words ("next turn of #2"); may be empty.')
    rank: int | None = Field(description="A channel's 1-based rank of the hit.")
    factor: float | None = Field(description="The multiplier an adjustment applied, if any.")


class ExplainedHitOut(HitOut):
    """A search hit; with ``explain``, also the parts of its score."""

    parts: list[PartOut] = Field(
        default=[],
        description="Only with explain: the channels' shares, then each adjustment, in order; "
        "their values sum to score.",
    )

    @classmethod
    def of_hit(cls, hit: Hit, *, explain: bool = False) -> ExplainedHitOut:
        return cls.model_validate(wire.hit_to_wire(hit, parts=explain))


class SearchOut(BaseModel):
    hits: list[ExplainedHitOut]
