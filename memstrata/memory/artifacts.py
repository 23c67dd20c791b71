"""What the core does with a cube's artifacts whatever their kind (KV caches, adapters).

``keep_only`` leaves one artifact of a kind after a rebuild; ``forget`` drops every KV cache and
adapter of cubes that had items erased (each was computed from the cube's words, and may hold
erased ones), and the images no item of the cube names any more (``memory.media``).

**Seals** (issue 24, finding 4): a KV cache's bytes go to llama.cpp's state loader and an
adapter's tensors onto a model, so only artifacts this server made may be loaded.  ``Seal.put``
stores an artifact with a MAC in its metadata (``MAC``: HMAC-SHA256, under the database's own
secret, ``Store.artifact_key``, of the cube id, the kind, the fingerprint and the sha256 of the
bytes); ``Seal.open`` gives an artifact's bytes only when that MAC verifies over the bytes just
read from its file, and otherwise deletes the artifact (row and file) and gives None, so the
caller rebuilds it.  A row and file planted any other way (an old import, a copy from another
cube or another server, a file changed on disk, an artifact made before seals existed) is never
handed to a loader, whatever its fingerprint says.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from memstrata.memcube import Artifact
from memstrata.memory import media
from memstrata.store.base import ArtifactStore

log = logging.getLogger(__name__)

#: The metadata field holding an artifact's MAC (lowercase hex).
MAC = "mac"
#: What a MAC is of, first in every message MACed (a MAC made for anything else never matches).
PURPOSE = "memstrata-artifact/1"


def keep_only(
    store: ArtifactStore, cube_id: str, existing: Sequence[Artifact], kept: Artifact | None
) -> None:
    """Delete the ``existing`` artifacts of ``cube_id`` but ``kept`` (all of them when None)."""
    stale = [a.artifact_id for a in existing if kept is None or a.artifact_id != kept.artifact_id]
    store.delete_artifacts(cube_id, stale)


def forget(store: media.MediaStore, cube_ids: Sequence[str]) -> None:
    """Delete what these cubes computed from their items (every artifact but images), files
    included, and their images no item names any more."""
    for cube_id in cube_ids:
        computed = [a.artifact_id for a in store.artifacts(cube_id) if a.kind != media.KIND]
        store.delete_artifacts(cube_id, computed)
        media.forget_unused(store, cube_id)


class Seal:
    """Stores the artifacts this server makes sealed, and opens only sealed ones (see the module
    docstring).  The key is read from the store once, on first use.  Thread-safe."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store
        self._key: bytes | None = None

    def put(
        self, cube_id: str, kind: str, fingerprint: str, data: bytes, metadata: Mapping[str, Any]
    ) -> Artifact:
        """``Store.put_artifact`` with the artifact's MAC added to ``metadata``."""
        mac = self._mac(cube_id, kind, fingerprint, data)
        return self.store.put_artifact(cube_id, kind, fingerprint, data, {**metadata, MAC: mac})

    def open(self, cube_id: str, artifact: Artifact) -> bytes | None:
        """The bytes of ``artifact`` (of ``cube_id``) when its MAC verifies over them; else
        None, the artifact deleted (a file that cannot be read is deleted too)."""
        try:
            data = artifact.path.read_bytes()
        except OSError as exc:
            self._refuse(cube_id, artifact, f"its file cannot be read ({exc.strerror})")
            return None
        if self.verifies(cube_id, artifact, data):
            return data
        self._refuse(cube_id, artifact, "its MAC does not verify")
        return None

    def verifies(self, cube_id: str, artifact: Artifact, data: bytes) -> bool:
        """Whether ``artifact``'s MAC is that of ``data`` as ``cube_id``'s (constant time)."""
        stored = artifact.metadata.get(MAC)
        if not isinstance(stored, str):
            return False
        wanted = self._mac(cube_id, artifact.kind, artifact.fingerprint, data)
        return hmac.compare_digest(stored, wanted)

    def _mac(self, cube_id: str, kind: str, fingerprint: str, data: bytes) -> str:
        if self._key is None:
            self._key = self.store.artifact_key()
        # Lines cannot run into each other: ids, kinds and fingerprints hold no newline.
        message = "\n".join([PURPOSE, cube_id, kind, fingerprint, hashlib.sha256(data).hexdigest()])
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def _refuse(self, cube_id: str, artifact: Artifact, why: str) -> None:
        log.warning(
            "%s artifact %s of cube %s is not loaded: %s; it is deleted and made again",
            artifact.kind, artifact.artifact_id, cube_id, why,
        )  # fmt: skip
        self.store.delete_artifacts(cube_id, [artifact.artifact_id])
