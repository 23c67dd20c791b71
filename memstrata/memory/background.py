"""The background work a caller can see and steer (DESIGN §8): wait, task lists, consolidate now,
a cube's artifacts and its KV cache built now.

``MemoryOS`` delegates here.  The tasks themselves (consolidation, promotion, visit counts) are
``memstrata.tiers.tasks``; the queue and its workers are ``memstrata.scheduler``.
"""

from __future__ import annotations

import time

from memstrata.limits import MAX_TOP_K
from memstrata.memcube import Artifact
from memstrata.memory.access import check_int
from memstrata.memory.components import Components
from memstrata.scheduler import Task, TaskStatus


class Background:
    """``MemoryOS``'s calls on background tasks (see the module docs)."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts
        self._access = parts.access

    def wait(
        self,
        cube_id: str | None = None,
        timeout: float | None = None,
        *,
        user_id: str | None = None,
    ) -> bool:
        """Block until no task is outstanding for ``cube_id`` (or at all); False on timeout.

        With ``user_id`` (how every surface calls it) the caller must be able to read
        ``cube_id``, and without ``cube_id`` it waits for each cube that user may read, within
        one ``timeout`` in all.  With ``workers=0`` the due tasks run here, in the caller's
        thread.
        """
        scheduler = self._parts.scheduler
        if user_id is None:
            return scheduler.wait(cube_id, timeout)
        cubes = self._access.readable(user_id, None if cube_id is None else [cube_id])
        deadline = None if timeout is None else time.monotonic() + timeout
        for cube in cubes:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not scheduler.wait(cube.cube_id, left):
                return False
        return True

    def tasks(
        self,
        *,
        user_id: str,
        cube_id: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """Recent background tasks (newest first) of ``cube_id``, or of every readable cube."""
        check_int(limit, "limit", 1, MAX_TOP_K)
        cubes = self._access.readable(user_id, None if cube_id is None else [cube_id])
        readable = {c.cube_id for c in cubes}
        found = self._parts.scheduler.queue.tasks(cube_id=cube_id, status=status, limit=limit)
        return [t for t in found if t.cube_id in readable]

    def consolidate(self, cube_id: str, *, user_id: str, promote_all: bool = False) -> int:
        """Consolidate a cube now, in this thread, instead of waiting for the background task.

        Overflowing working turns move to the mid tier; with ``promote_all`` every active
        segment is also promoted whatever its heat (MemoryOS's ``force_mid_term_analysis``).
        Needs ``write``.  Returns how many findings the long tier took in.
        """
        cube = self._access.cube(user_id, cube_id, "write")
        return self._parts.tiers.consolidate_now(cube, promote_all)

    def artifacts(self, cube_id: str, *, user_id: str) -> list[Artifact]:
        """The cube's artifacts (KV caches, adapters), oldest first: id, kind, fingerprint,
        size, sha256 and metadata (a KV cache's: model, token count, source items' ids and
        versions).  Needs ``read``."""
        self._access.cube(user_id, cube_id, "read")
        return self._parts.store.artifacts(cube_id)

    def build_activation(self, cube_id: str, *, user_id: str) -> Artifact | None:
        """Prefill the local chat model with the cube's stable context now, in this thread,
        and keep its state as the cube's KV cache (``memory.activation``); returns it, or None
        when there is no local model, ``activation_tokens`` is 0 or nothing is stable yet.
        Chats build it in the background anyway; this is for warming up.  Needs ``write``."""
        self._access.cube(user_id, cube_id, "write")
        return self._parts.activation.build(cube_id)
