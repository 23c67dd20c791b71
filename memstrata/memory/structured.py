"""``add`` of messages that are more than text: tool calls and results, images and files.

``Items.add`` hands the messages here when one of them is structured (``reader.parts``) or tool
definitions are given.  Everything is read and checked first (documents parsed, images decoded
and recognised), then written in one ``add_items`` transaction: each message's turn (when it has
text), its images (``memory.media``), the chunks of its files (as ``add_document`` makes them)
and the tool calls it made or answered (``memory.tools``), after the tools' new schemas.  The
images' artifacts are written first and removed again if the items cannot be.

The ids returned are those of every item written, in that order (a message may give none, one
or several).  ``Images`` is ``MemoryOS.get_image``: an image item's bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from memstrata.memory import expiry, media, tools
from memstrata.memory.components import Components
from memstrata.model import Cube, MemoryItem
from memstrata.reader import documents
from memstrata.reader.messages import Message
from memstrata.reader.parts import ToolSpec

#: ``Items.chunk_items``: a parsed document's chunk items, unwritten.
ChunkItems = Callable[..., list[MemoryItem]]


def weight(messages: Sequence[Message]) -> int:
    """How heavy an add is (``memory.fairness``): its characters of text and bytes of files."""
    return sum(len(m.content) + sum(len(f.data) for f in m.files) for m in messages)


def add(
    store: media.MediaStore,
    cube: Cube,
    given: datetime | None,
    messages: Sequence[Message],
    bases: Sequence[MemoryItem],
    specs: Sequence[ToolSpec],
    chunk_items: ChunkItems,
    store_new: Callable[[list[MemoryItem]], list[str]],
) -> list[str]:
    """Write ``messages`` to ``cube`` (``bases``: each one's turn item as a plain add makes it;
    ``given``: the call's ``expires_at``) and return the ids written (see the module docs)."""
    draft = tools.trajectory(store, messages, bases, specs)
    ordered: list[MemoryItem] = []
    images: list[media.Image] = []
    rows = zip(messages, draft.bases, draft.turns, draft.calls, strict=True)
    for message, base, kept, calls in rows:
        shown = media.image_items(message, base, kept)
        images.extend(shown)
        ordered.extend([kept] if kept is not None else [])
        ordered.extend(i.item for i in shown)
        for file in message.files:
            text = documents.parse_document(file.filename, file.data)
            about = {"message": None if kept is None else kept.id}
            user = base.user_id or ""
            made = chunk_items(
                text, file.data, file.filename, user, cube, base.session_id, about, given
            )
            ordered.extend(made)
        ordered.extend(calls)
    if not draft.schemas and not ordered:
        return []
    kept_images = media.store_images(store, images)
    try:
        return store_new(draft.schemas + ordered)
    except BaseException:
        media.drop(store, cube.cube_id, kept_images)
        raise


class Images:
    """``MemoryOS.get_image``: an image item's bytes."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts

    def get_image(
        self, item_id: str, *, user_id: str, cube_id: str | None = None
    ) -> tuple[str, bytes]:
        """The media type and bytes of an ``image`` item sent as data (needs ``read``);
        ``ItemNotFound`` for another item, an image kept as a reference, or an expired one."""
        store = self._parts.store
        item = expiry.check_live(store, self._parts.access.item(item_id, user_id, "read", cube_id))
        return media.image_bytes(store, item)
