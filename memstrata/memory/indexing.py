"""The background task that keeps a cube's approximate dense index current (§8).

After an add, ``added`` asks the store whether the cube's index is due (cheap) and queues one
``index_vectors`` task per cube (deduplicated).  The task builds or extends the index in a
worker, never on the add or search path; searches meanwhile stay exact for what the index does
not cover yet (``memstrata.store.sqlite.ann``).
"""

from __future__ import annotations

from typing import Protocol

from memstrata.scheduler import Scheduler, Task
from memstrata.store.base import CubeStore, SearchIndex


class IndexedStore(CubeStore, SearchIndex, Protocol):
    """What the index task uses: whether a cube still exists, and the index calls."""


class IndexTasks:
    """Registers ``index_vectors`` on a scheduler and queues it when a cube's index is due."""

    def __init__(self, store: IndexedStore, scheduler: Scheduler) -> None:
        self.store = store
        self.scheduler = scheduler
        scheduler.register("index_vectors", self._index)

    def added(self, cube_id: str) -> None:
        """Queue the cube's index build if the store says one is due."""
        if self.store.vector_index_due(cube_id):
            self.scheduler.submit(
                "index_vectors", {}, cube_id=cube_id, dedupe_key=f"index_vectors:{cube_id}"
            )

    def _index(self, task: Task) -> None:
        """Task ``index_vectors``: build or extend the cube's index (nothing for a cube gone)."""
        if task.cube_id is not None and self.store.get_cube(task.cube_id) is not None:
            self.store.build_vector_index(task.cube_id)
