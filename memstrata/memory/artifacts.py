"""What the core does with a cube's artifacts whatever their kind (KV caches, adapters).

``keep_only`` leaves one artifact of a kind after a rebuild; ``forget`` drops every artifact of
cubes that had items erased: each was computed from the cube's words, and may hold erased ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.memcube import Artifact
from memstrata.store.base import Store


def keep_only(
    store: Store, cube_id: str, existing: Sequence[Artifact], kept: Artifact | None
) -> None:
    """Delete the ``existing`` artifacts of ``cube_id`` but ``kept`` (all of them when None)."""
    stale = [a.artifact_id for a in existing if kept is None or a.artifact_id != kept.artifact_id]
    store.delete_artifacts(cube_id, stale)


def forget(store: Store, cube_ids: Sequence[str]) -> None:
    """Delete every artifact of these cubes, files included."""
    for cube_id in cube_ids:
        store.delete_artifacts(cube_id, [a.artifact_id for a in store.artifacts(cube_id)])
