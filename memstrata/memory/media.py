"""Images of multimodal messages: kept as artifacts of the cube, found by their caption.

An image part (``reader.parts``) becomes an item of type ``image`` (long tier) whose text is its
caption: the part's ``alt``/``caption``, else the text of its message, else "an image".  That
text is what search finds; no model looks at the image (none is fetched at run time).

* An image sent as data (a ``data:`` URL of at most ``MAX_IMAGE_BYTES``) is stored as an
  ``image`` artifact of the cube (``store.artifacts``: a file beside the database), and the item's
  ``metadata["image"]`` names its ``sha256``, media type and size.  The sha256 is the link: it
  survives a MemCube export and import (which give items and artifacts new ids).
* An image given by address is stored as that reference (``metadata["image"]["url"]``) and is
  never downloaded: the server makes no request a client could aim (SSRF).

An image's artifact goes with its item: when an erasure (``memory.erase``, expiry, feedback
"forget") leaves no item of the cube naming its sha256, ``forget_unused`` deletes it; deleting the
cube deletes its artifact folder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from memstrata.errors import ItemNotFound
from memstrata.filters import Filters
from memstrata.memcube import Artifact
from memstrata.model import STATUSES, MemoryItem, new_id
from memstrata.reader.messages import Message
from memstrata.reader.parts import ImagePart
from memstrata.store.base import ArtifactStore, ItemStore


class MediaStore(ItemStore, ArtifactStore, Protocol):
    """What an image's bookkeeping uses: the items that name images, and the artifacts."""


#: The artifact kind of an image.
KIND = "image"
#: The caption of an image sent without one, in a message without text.
NO_CAPTION = "an image"


@dataclass(frozen=True)
class Image:
    """An image item to write, and the bytes its artifact holds (None for a reference)."""

    item: MemoryItem
    data: bytes | None


def image_items(message: Message, base: MemoryItem, turn: MemoryItem | None) -> list[Image]:
    """The image items of ``message`` (``base`` is its turn item, whose cube, session, user and
    times they share; ``turn`` the turn kept for its text, if any)."""
    made = []
    for part in message.images:
        caption = part.caption or message.content.strip() or NO_CAPTION
        item = replace(
            base,
            id=new_id(),
            text=caption,
            tier="long",
            type="image",
            status="activated",
            key=KIND,
            external_id=None,
            metadata={"image": _described(part), "turn": None if turn is None else turn.id},
        )
        made.append(Image(item, part.data))
    return made


def _described(part: ImagePart) -> dict[str, Any]:
    if part.data is None:
        return {"url": part.url}
    return {
        "sha256": hashlib.sha256(part.data).hexdigest(),
        "media_type": part.media_type,
        "bytes": len(part.data),
    }


def store_images(store: ArtifactStore, images: Sequence[Image]) -> list[Artifact]:
    """Write the artifacts of ``images`` (those sent as data); the caller removes them with
    ``drop`` if the items cannot be written after."""
    kept: list[Artifact] = []
    try:
        for image in images:
            if image.data is None:
                continue
            described = image.item.metadata["image"]
            about = {"sha256": described["sha256"], "caption": image.item.text[:200]}
            media = str(described["media_type"])
            kept.append(store.put_artifact(image.item.cube_id, KIND, media, image.data, about))
    except BaseException:
        drop(store, images[0].item.cube_id, kept)
        raise
    return kept


def drop(store: ArtifactStore, cube_id: str, artifacts: Sequence[Artifact]) -> None:
    """Delete these artifacts of ``cube_id`` (an ``add`` that failed after writing them)."""
    if artifacts:
        store.delete_artifacts(cube_id, [a.artifact_id for a in artifacts])


def image_bytes(store: ArtifactStore, item: MemoryItem) -> tuple[str, bytes]:
    """The media type and bytes of an ``image`` item's artifact; ``ItemNotFound`` for an item
    that is no image held as data (a reference, or another type)."""
    described = item.metadata.get("image") if item.type == "image" else None
    sha = described.get("sha256") if isinstance(described, dict) else None
    for artifact in store.artifacts(item.cube_id, KIND):
        if sha is not None and artifact.sha256 == sha:
            data = artifact.path.read_bytes()
            if hashlib.sha256(data).hexdigest() == sha:  # a file changed on disk is not served
                return str(described["media_type"]), data  # type: ignore[index]
    raise ItemNotFound(item.id, item.cube_id)


def forget_unused(store: MediaStore, cube_id: str) -> None:
    """Delete the cube's image artifacts no item of it names any more (after an erasure)."""
    images = store.artifacts(cube_id, KIND)
    if not images:
        return
    named = {
        str(i.metadata.get("image", {}).get("sha256"))
        for i in store.list_items(cube_id, Filters(types=("image",), statuses=STATUSES))
        if isinstance(i.metadata.get("image"), dict)
    }
    store.delete_artifacts(cube_id, [a.artifact_id for a in images if a.sha256 not in named])
