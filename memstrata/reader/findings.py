"""What a reader finds in pages: candidate long-tier memories, each with its evidence.

Every reader (offline rules, an LLM) returns ``Finding`` objects; the long tier decides what
becomes memory.  A finding never carries text that is not grounded in its pages:
readers cite the page ids they read it from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from memstrata.embed.base import Vectors
from memstrata.model import MemoryItem

FindingType = Literal["fact", "profile", "preference", "knowledge"]


@dataclass(frozen=True)
class Finding:
    """One candidate memory.

    * ``fact``: something that happened or holds, as a third-person sentence;
    * ``profile``: an attribute of ``subject``: ``key`` (``lives_in``, ``job``…) → ``value``;
    * ``preference``: ``subject`` likes (``polarity`` +1) or dislikes (-1) ``key`` (the object);
      ``explicit`` when stated ("I love…"), else implicit ("I always…");
    * ``knowledge``: what the assistant said it knows or will do.
    """

    type: FindingType
    text: str
    subject: str
    sources: tuple[str, ...]
    key: str | None = None
    value: str | None = None
    polarity: int = 0
    explicit: bool = True
    confidence: float = 0.6
    extra: dict[str, str] = field(default_factory=dict)
    #: The text's vector when the reader already embedded it (the long tier then does not).
    vector: Vectors | None = field(default=None, compare=False, repr=False)


class Reader(Protocol):
    """Reads pages into findings (offline rules, or an LLM)."""

    name: str

    def read(self, pages: Sequence[MemoryItem]) -> list[Finding]:
        """Findings of ``pages``; each cites, in ``sources``, only ids of these pages."""
