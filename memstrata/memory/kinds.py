"""What a search's ``include`` names: lifecycle states and memory kinds, read once.

``include`` predates the memory kinds: it named states a search leaves out by default
(``merged``, ``archived``, ``frozen``; ``lifecycle.states``).  It may now also name kinds of
memory, MemOS's buckets:

========  ==================================================================================
``text``  everything said and read: turns, pages, facts, profile, preferences, chunks, images
``tool``  tool memory: tools' schemas (``tool``) and their calls (``tool_call``)
``skill`` skill memory: skills distilled from successful tasks (``skill``)
========  ==================================================================================

A search that names no kind covers ``text`` only (so tool calls and skills never crowd a plain
search); one that names kinds covers exactly those (``include=["tool"]`` ranks the tool calls
among themselves).  A search whose filters name ``type``\\ s explicitly and no kind keeps them
as given.  States and kinds combine: ``["skill", "archived"]`` also finds archived skills.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, get_args

from memstrata.errors import ValidationError
from memstrata.filters import Filters
from memstrata.lifecycle import states
from memstrata.model import ITEM_TYPES, SKILL_TYPES, TOOL_TYPES

MemoryKind = Literal["text", "tool", "skill"]
KINDS: tuple[str, ...] = get_args(MemoryKind)
#: Everything ``include`` may name: the includable states (``lifecycle.states.Includable``)
#: then the kinds (the REST and MCP schemas list these; a test checks they are the two sets).
SearchInclude = Literal["merged", "archived", "frozen", "text", "tool", "skill"]
SEARCH_INCLUDE: tuple[str, ...] = get_args(SearchInclude)
#: The item types of each kind.
KIND_TYPES: dict[str, tuple[str, ...]] = {
    "tool": TOOL_TYPES,
    "skill": SKILL_TYPES,
    "text": tuple(t for t in ITEM_TYPES if t not in TOOL_TYPES + SKILL_TYPES),
}


def scope(filters: Filters, include: Sequence[str] | None) -> Filters:
    """``filters`` with the statuses and types ``include`` asks for (see the module docs)."""
    if include is not None and (isinstance(include, str) or not isinstance(include, (list, tuple))):
        raise ValidationError("include must be a list of states or memory kinds")
    named = list(include or ())
    kinds = [k for k in named if k in KINDS]
    rest = [s for s in named if s not in KINDS]
    if rest and any(s not in states.INCLUDABLE for s in rest):
        unknown = [s for s in rest if s not in states.INCLUDABLE]
        raise ValidationError(
            f"cannot include {', '.join(map(repr, unknown))[:200]} in search",
            hint=f"include may name the states {', '.join(states.INCLUDABLE)} and the memory "
            f"kinds {', '.join(KINDS)}",
        )
    if rest:
        statuses = (*filters.statuses, *states.searched_statuses(rest))
        filters = replace(filters, statuses=tuple(dict.fromkeys(statuses)))
    if not kinds and filters.types is not None:
        return filters
    wanted = [t for k in (kinds or ["text"]) for t in KIND_TYPES[k]]
    if filters.types is not None:
        wanted = [t for t in wanted if t in filters.types]
    # An empty intersection must find nothing, not everything: no type matches "".
    return replace(filters, types=tuple(dict.fromkeys(wanted)) or ("",))
