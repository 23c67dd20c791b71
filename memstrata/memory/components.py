"""What every part of the core stands on: the store, the embedder, the settings and the rest.

One ``Components`` is made by ``MemoryOS`` and shared by its parts (``principals``, ``items``,
``reading``, ``chat``, ``governance``, ``background``), so they see the same settings after a
``configure`` and check grants through the same ``Access``.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstrata.config import Settings
from memstrata.embed import Embedder
from memstrata.llm import LLM
from memstrata.memory.access import Access
from memstrata.scheduler import Scheduler
from memstrata.store.base import Store
from memstrata.tiers.tasks import TierTasks


@dataclass
class Components:
    """The parts of one ``MemoryOS``; ``settings`` is replaced (never mutated) by ``configure``."""

    store: Store
    embedder: Embedder
    settings: Settings
    #: the chat model (chat, and the ``llm`` reader when chosen); None without one
    llm: LLM | None
    scheduler: Scheduler
    tiers: TierTasks
    access: Access
