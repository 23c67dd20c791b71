"""MemoryOS-style results: the shapes MemoryOS's own API returns, made once.

``memstrata.compat`` (the ``Memoryos`` facade) and the MCP tools (``retrieve_memory``,
``get_user_profile``) both answer in MemoryOS's vocabulary — pages, user knowledge, assistant
knowledge, a profile summary — so the split of a packed context into those parts and the shape
of each entry live here, not in either adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.model import MemoryItem, ProfileAttribute
from memstrata.retrieval.pack import Context

#: Long-tier types that are knowledge about the user (MemoryOS's "user knowledge").
USER_KNOWLEDGE = ("fact", "profile", "preference")


@dataclass(frozen=True)
class Recall:
    """A context split the way MemoryOS reports it; every list is in context order."""

    context: Context
    #: the retrieved turns (MemoryOS's "pages")
    pages: list[MemoryItem]
    #: long-tier items about the user: facts, profile entries, preferences
    user_knowledge: list[MemoryItem]
    #: long-tier assistant knowledge
    assistant_knowledge: list[MemoryItem]
    #: the cube's working-tier turns, oldest first (MemoryOS's "short-term memory")
    working: list[MemoryItem]
    #: the user's own profile attributes, one ``key: value`` line each ("" if none)
    profile: str


def recall(context: Context, working: list[MemoryItem], profile: str) -> Recall:
    """``context``'s items as pages, user knowledge and assistant knowledge, with the cube's
    working turns and the user's profile summary."""
    long = [i for i in context.items if i.tier == "long"]
    return Recall(
        context=context,
        pages=[i for i in context.items if i.type == "turn"],
        user_knowledge=[i for i in long if i.type != "knowledge"],
        assistant_knowledge=[i for i in long if i.type == "knowledge"],
        working=working,
        profile=profile,
    )


def page(item: MemoryItem) -> dict[str, Any]:
    """A turn as a MemoryOS page: id, text, speaker and ISO 8601 timestamp."""
    when = item.event_time.isoformat()
    return {"id": item.id, "text": item.text, "speaker": item.speaker, "timestamp": when}


def knowledge(item: MemoryItem) -> dict[str, Any]:
    """A long-tier item as a MemoryOS knowledge entry: id, text and ISO 8601 timestamp."""
    return {"id": item.id, "knowledge": item.text, "timestamp": item.event_time.isoformat()}


def profile_summary(user_id: str, attributes: Sequence[ProfileAttribute]) -> str:
    """``user_id``'s own attributes, one ``key: value`` line each ("" if none)."""
    return "\n".join(
        f"{a.key.replace('_', ' ')}: {a.value}" for a in attributes if a.subject == user_id
    )
