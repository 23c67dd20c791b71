"""AutoGen over memstrata: ``MemstrataMemory``, an ``autogen_core.memory.Memory`` kept in a
memstrata cube.  Needs the ``autogen`` extra; docs/integrations/autogen.md has the mapping and an
example.

Mapping:

* One memory is one user (``user_id=``) in one cube (``cube_id=``, or the user's default cube),
  and within it one session, named for the memory (``name=``, default ``autogen``; kept as it is
  when it is a valid memstrata id, else ``ag-<digest>``).  Two users' memories of one name are
  two sessions of two cubes: neither reads the other.
* ``add`` stores a ``MemoryContent`` as one memory (a turn the tiers read like any other): its
  text is the content (a dict of JSON content as sorted JSON), its MIME type and metadata are in
  the item's metadata (``ag.mime``, ``ag.metadata``; a dict content also as ``ag.json``), so a
  query gives back what was added.  Text, Markdown and JSON are stored; bytes and images are a
  ``ValidationError``.
* ``query`` is memstrata's hybrid search over the memory's items (``top_k``, default the
  memory's ``k``), best first; an empty query lists them, oldest first, as ``ListMemory`` does
  (at most ``MAX_TOP_K``).  ``update_context`` queries with the text of the context's last
  message and adds what it finds as one ``SystemMessage`` (the recalled text neutralised: it can
  hold no control token of a model's prompt).
* ``clear`` erases the memory's session for good (with what the tiers derived from it);
  ``close`` closes the thread pool this memory made over a ``MemoryOS`` (never a memory it was
  given).

The memory given is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``, called
through ``aio.AsyncBackend`` (``mapping``'s rules: with a client the user is the API key's
owner): an async memory is awaited on the event loop, a ``MemoryOS`` runs in a bounded thread
pool made over it.
"""

from __future__ import annotations

import json
from typing import Any

from autogen_core import CancellationToken, Image
from autogen_core.memory import (
    Memory,
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    UpdateContextResult,
)
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import SystemMessage

from memstrata.errors import ValidationError
from memstrata.integrations import mapping
from memstrata.integrations.aio import AsyncBackend
from memstrata.limits import MAX_TOP_K
from memstrata.llm.neutral import neutralise
from memstrata.model import MemoryItem

__all__ = ["MemstrataMemory"]

#: Metadata keys of a memory content: its MIME type (and whether it was a ``MemoryMimeType``),
#: its metadata, its dict content.
MIME, ENUM, META, JSON = "ag.mime", "ag.mime_enum", "ag.metadata", "ag.json"
#: What heads the system message ``update_context`` adds.
HEADING = "\nRelevant memory content (most relevant first):\n"


class MemstrataMemory(Memory):
    """AutoGen's ``Memory``, kept by memstrata (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``;
    ``user_id`` the acting user (created if missing; with a client, its key's owner, and may be
    omitted: another user is a ``ValidationError`` at the first call); ``cube_id`` the cube
    (created, owned by the user, if missing; default: the user's default cube; one the user may
    not read is ``PermissionDenied``, at the first call); ``name`` the memory (its session);
    ``k`` how many memories a query returns (1 to ``MAX_TOP_K``).
    """

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        cube_id: str | None = None,
        name: str = "autogen",
        k: int = 5,
    ) -> None:
        if not 1 <= k <= MAX_TOP_K:
            raise ValidationError(f"k must be 1 to {MAX_TOP_K}", hint="k=5")
        self.memory = memory
        self.backend = AsyncBackend(memory, user_id=user_id, cube_id=cube_id)
        self._name = name
        self.session = mapping.line_id(name, "ag")
        self.k = k

    @property
    def name(self) -> str:
        """The memory's name (its session in the cube)."""
        return self._name

    async def user_id(self) -> str:
        """The acting user (with a client, its key's owner)."""
        return await self.backend.user_id()

    async def cube_id(self) -> str:
        """The memory's cube (resolved, and created when missing, on first use)."""
        return await self.backend.cube_id()

    # -- the Memory protocol -----------------------------------------------------------------

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Recall what is relevant to the context's last message and add it to the context as
        one ``SystemMessage`` (nothing when nothing is found)."""
        messages = await model_context.get_messages()
        query = _text(messages[-1].content) if messages else ""
        found = await self.query(query)
        if found.results:
            lines = [f"{i}. {neutralise(_shown(c))}" for i, c in enumerate(found.results, 1)]
            await model_context.add_message(SystemMessage(content=HEADING + "\n".join(lines)))
        return UpdateContextResult(memories=found)

    async def query(
        self,
        query: str | MemoryContent = "",
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """The memory's contents most relevant to ``query`` (``top_k=`` or ``k`` of them), best
        first; an empty query lists them oldest first."""
        text = query if isinstance(query, str) else _stored(query)[0]
        top_k = int(kwargs.get("top_k", self.k))
        items = await self._recall(await self.cube_id(), text, top_k)
        return MemoryQueryResult(results=[_content(i) for i in items])

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:  # fmt: skip
        """Store ``content`` as one memory of this memory's session."""
        text, metadata = _stored(content)
        message = {"role": "user", "content": text, "metadata": metadata}
        cube = await self.cube_id()
        await self.backend.add([message], cube_id=cube, session_id=self.session)

    async def clear(self) -> None:
        """Erase the memory's session: its contents and what was derived from them, for good."""
        cube = await self.cube_id()
        await self.backend.erase(cube_id=cube, session_id=self.session, reason="AutoGen memory cleared")  # fmt: skip

    async def close(self) -> None:
        """Close the thread pool this memory made over a ``MemoryOS`` (never a memory given)."""
        await self.backend.aclose()

    async def _recall(self, cube: str, query: str, top_k: int) -> list[MemoryItem]:
        """The session's items: ranked by ``query``, or oldest first when it is blank."""
        filters = {"session_id": self.session, "type": "turn"}
        if query.strip():
            hits = await self.backend.search(query, cube_ids=[cube], top_k=top_k, filters=filters)
            return [h.item for h in hits]
        listed: list[MemoryItem] = await self.backend.list_memories(
            cube, filters=filters, limit=MAX_TOP_K
        )
        return listed


def _stored(content: MemoryContent) -> tuple[str, dict[str, Any]]:
    """``content`` as a memory's text and metadata; ``ValidationError`` for bytes and images."""
    given = content.mime_type
    enum = isinstance(given, MemoryMimeType)
    mime = given.value if isinstance(given, MemoryMimeType) else str(given)
    metadata: dict[str, Any] = {MIME: mime, ENUM: enum, META: content.metadata}
    value = content.content
    if isinstance(value, dict):
        metadata[JSON] = value
        return json.dumps(value, sort_keys=True, ensure_ascii=False), metadata
    if isinstance(value, (bytes, Image)):
        raise ValidationError(
            "memstrata stores text, Markdown and JSON memory contents, not bytes or images",
            hint="store a description of it as text",
        )
    return str(value), metadata


def _content(item: MemoryItem) -> MemoryContent:
    """The ``MemoryContent`` an item holds (one added by another surface: plain text)."""
    mime = item.metadata.get(MIME)
    value = item.metadata.get(JSON)
    metadata = item.metadata.get(META)
    return MemoryContent(
        content=value if isinstance(value, dict) else item.text,
        mime_type=_mime(mime, item.metadata.get(ENUM) is True),
        metadata=metadata if isinstance(metadata, dict) else None,
    )


def _mime(value: Any, enum: bool) -> MemoryMimeType | str:
    """The MIME type stored: a ``MemoryMimeType`` when one was added, else the string; plain
    text for an item added by another surface."""
    if not isinstance(value, str):
        return MemoryMimeType.TEXT
    if enum:
        try:
            return MemoryMimeType(value)
        except ValueError:
            pass
    return value


def _shown(content: MemoryContent) -> str:
    """A content as the system message shows it (ListMemory's ``str(content)``)."""
    return str(content.content)


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the strings of a list (images left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part for part in content if isinstance(part, str))
    return ""
