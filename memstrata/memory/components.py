"""What every part of the core stands on: the store, the embedder, the settings and the rest.

One ``Components`` is made by ``MemoryOS`` and shared by its parts (``principals``, ``items``,
``reading``, ``chat``, ``governance``, ``background``), so they see the same settings after a
``configure`` and check grants through the same ``Access``.

Runtime settings (``configure``) are kept in the database too (``RUNTIME_META``), so every
process serving it searches with them: ``search_settings()`` reads them back before a search
(one primary-key read) and applies them when another process changed them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from memstrata.config import Settings
from memstrata.embed import Embedder
from memstrata.llm import LLM
from memstrata.memory import artifacts
from memstrata.memory.access import Access
from memstrata.memory.activation import ActivationMemory
from memstrata.memory.indexing import IndexTasks
from memstrata.memory.parametric import ParametricMemory
from memstrata.scheduler import Scheduler
from memstrata.store.base import Store
from memstrata.tiers.tasks import TierTasks

#: The database setting holding the runtime settings an admin changed (JSON), for all processes.
RUNTIME_META = "runtime_settings"


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
    #: queues the approximate dense index's builds
    index: IndexTasks
    #: the cubes' KV caches for the local chat model
    activation: ActivationMemory
    #: the cubes' LoRA adapters
    parametric: ParametricMemory
    #: the runtime settings last read from the database (JSON text), to see a change
    _runtime: str | None = field(default=None, repr=False)

    def forget(self, cube_ids: list[str]) -> None:
        """Delete what was computed from these cubes' items (KV caches, adapters): called after
        an erasure in them."""
        artifacts.forget(self.store, cube_ids)

    def share_settings(self, changes: dict[str, float]) -> Settings:
        """Apply runtime ``changes`` here and record them for every process on the database."""
        stored = json.loads(self.store.get_meta(RUNTIME_META) or "{}")
        text = json.dumps({**stored, **changes}, sort_keys=True)
        self.store.set_meta(RUNTIME_META, text)
        self.settings = Settings.from_mapping({**vars(self.settings), **json.loads(text)})
        self._runtime = text
        return self.settings

    def search_settings(self) -> Settings:
        """The settings to search with: runtime ones another process recorded applied first."""
        text = self.store.get_meta(RUNTIME_META)
        if text is not None and text != self._runtime:
            self.settings = Settings.from_mapping({**vars(self.settings), **json.loads(text)})
            self._runtime = text
        return self.settings
