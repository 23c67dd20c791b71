"""The working tier (MemoryOS's short-term memory): each session's recent turns.

A turn is added to the working tier.  Consolidation keeps the newest ``working_capacity`` turns
of every session there and moves the older ones to the mid tier as pages (same ids, one event
each).  A session that has gone quiet — its newest turn ``session_idle_hours`` older, in event
time, than the cube's newest turn — is over: all its turns move, so that what was said at the
end of a conversation is read into the long tier like the rest.  It runs as a scheduler task,
so ``add`` never waits for it.
"""

from __future__ import annotations

from memstrata.model import MemoryItem
from memstrata.store.base import ConsolidationStore
from memstrata.tiers.mid import MidTier
from memstrata.tiers.settings import TierSettings


def consolidate(store: ConsolidationStore, cube_id: str, embedder: str) -> list[MemoryItem]:
    """Move a cube's overflowing working turns into mid-tier segments; the segments touched.

    Idempotent: with nothing overflowing it changes nothing.
    """
    cube = store.get_cube(cube_id)
    if cube is None:
        return []
    settings = TierSettings.parse(cube.settings)
    idle = settings.session_idle_hours * 3600 or None
    overflow = store.overflowing_turns(cube_id, settings.working_capacity, idle)
    return MidTier(store, embedder).place(overflow, settings)
