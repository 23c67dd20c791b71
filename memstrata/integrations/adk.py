"""Google ADK over memstrata: ``MemstrataMemoryService``, a ``BaseMemoryService`` whose memories
are memstrata memories.  Needs the ``adk`` extra; docs/integrations/adk.md has the mapping and an
example.

Mapping:

* ADK passes ``app_name`` and ``user_id`` with every call.  The ``user_id`` is the memstrata
  user every call acts as (created if missing), so the core's grants apply: one user's memories
  are never read for another.  The cube is ``cube_id=`` or each user's default cube; the
  ``app_name`` is item metadata (``adk.app``) that every search and delete is narrowed by.
* An event with text (``add_session_to_memory``, ``add_events_to_memory``) is one turn of the
  session (the ADK session id, kept as it is when it is a valid memstrata id, else
  ``adk-<digest>``): its text is the event's text parts, its role ``user`` when the author is the
  user (else ``assistant``, the author its speaker), its ``external_id`` ``adk:<event id>`` (an
  event added twice is one memory; an erased one is not added again), its content, author and
  time in metadata.  ``add_memory`` stores ``MemoryEntry`` objects the same way.
* ``search_memory`` is memstrata's hybrid search (``k`` hits) narrowed to the app; each hit
  is a ``MemoryEntry`` with the event's id, content, author and time.  ``delete_memory`` erases
  the memory of that id for good.
* The memory given is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``, called
  through ``aio.AsyncBackend``, one view per ADK user (``mapping``'s rules): with a client every
  call acts as the API key's owner, and an ADK ``user_id`` naming anyone else is a
  ``ValidationError``.  An async memory is awaited on the event loop; a ``MemoryOS`` runs in a
  bounded thread pool made over it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from memstrata.errors import NotFoundError, ValidationError
from memstrata.integrations import mapping
from memstrata.integrations.aio import AsyncBackend, UserBackends
from memstrata.limits import MAX_EXTERNAL_ID, MAX_TOP_K
from memstrata.model import MemoryItem

__all__ = ["MemstrataMemoryService"]

#: Metadata keys of an ADK memory: its app, id, author, time (epoch seconds) and content.
APP, ID, AUTHOR, TIME, CONTENT, CUSTOM = (
    "adk.app", "adk.id", "adk.author", "adk.ts", "adk.content", "adk.custom",
)  # fmt: skip
#: The metadata key of a deletion record: the ``external_id`` of a memory ``delete_memory``
#: erased, so that adding its session again does not bring it back.
DELETED = "adk.deleted"
#: The metadata key marking a deletion record.
MARK = "adk.record"
#: The author ADK gives the user's own events.
USER = "user"


class MemstrataMemoryService(BaseMemoryService):
    """ADK's memory service, kept by memstrata (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient`` (with a
    client, ADK's ``user_id`` must be the API key's owner); ``cube_id`` the cube every user's
    memories go to (created, owned by the first user, if missing; a user who may not read it
    gets ``PermissionDenied``); default: each user's default cube.  ``k`` is how many memories
    a search returns (1 to ``MAX_TOP_K``; ADK's ``InMemoryMemoryService`` returns at most 10).
    """

    def __init__(self, memory: mapping.Memory, *, cube_id: str | None = None, k: int = 10) -> None:
        if not 1 <= k <= MAX_TOP_K:
            raise ValidationError(f"k must be 1 to {MAX_TOP_K}", hint="k=10")
        self.memory = memory
        self.cube_id = cube_id
        self.k = k
        self.backends = UserBackends(memory, cube_id=cube_id)

    async def aclose(self) -> None:
        """Close the thread pool this service made over a ``MemoryOS`` (never a memory given)."""
        await self.backends.aclose()

    # -- BaseMemoryService -------------------------------------------------------------------

    async def add_session_to_memory(self, session: Session) -> None:
        """Add the session's events that have text (each once, however often it is added)."""
        await self._add(session.app_name, session.user_id, session.id, session.events, None)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add ``events`` (a delta) that have text, each once; ``custom_metadata`` is kept."""
        await self._add(app_name, user_id, session_id, list(events), custom_metadata)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add explicit memories (a ``MemoryEntry`` with an ``id`` is stored once)."""
        await self._add(app_name, user_id, None, list(memories), custom_metadata)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The app's memories of the user most relevant to ``query`` (``k``), best first."""
        backend = self.backends(user_id)
        hits = await backend.search(
            query, cube_ids=[await backend.cube_id()], top_k=self.k,
            filters={"metadata": {APP: app_name}},
        )  # fmt: skip
        return SearchMemoryResponse(memories=[_entry(h.item) for h in hits])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Erase the memory ``memory_id`` (a ``MemoryEntry.id``) for good; none: nothing.

        The memory is erased, then a deletion record (its ``external_id`` only) is left, sealed
        ``frozen``: searches, contexts and the tiers never see it, and adding the session
        again does not bring the memory back."""
        if not memory_id:
            return
        backend = self.backends(user_id)
        cube = await backend.cube_id()
        for item in await _find(backend, cube, app_name, memory_id):
            await backend.erase(item.id, cube_id=cube, reason="ADK delete_memory")
            if item.external_id is None:
                continue
            record = {MARK: True, APP: app_name, DELETED: item.external_id}
            (kept,) = await backend.add(
                [{"content": "ADK memory deleted", "metadata": record}], cube_id=cube
            )
            for to in ("activated", "frozen"):
                await backend.transition(kept, to, cube_id=cube)

    async def _add(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None,
        records: Iterable[Event | MemoryEntry],
        custom: Mapping[str, object] | None,
    ) -> None:
        unique = {t["id"]: t for t in (_turn(app_name, r, custom) for r in records) if t}
        turns = list(unique.values())  # an event twice in one call is one memory, as in ADK's
        if not turns:
            return
        backend = self.backends(user_id)
        cube = await backend.cube_id()
        session = None if session_id is None else mapping.line_id(session_id, "adk")
        erased = await _erased(backend, cube, [str(t["id"]) for t in turns])
        fresh = [t for t in turns if t["id"] not in erased]
        if fresh:
            await backend.add(fresh, cube_id=cube, session_id=session)


async def _erased(backend: AsyncBackend, cube: str, external_ids: list[str]) -> set[str]:
    """Which of ``external_ids`` name memories ``delete_memory`` erased (never added again):
    the deletion records' ids, read a page at a time."""
    wanted = set(external_ids)
    gone: set[str] = set()
    offset = 0
    while True:
        page = await backend.list_memories(
            cube, filters={"status": ["frozen"], "metadata": {MARK: True}},
            limit=MAX_TOP_K, offset=offset,
        )  # fmt: skip
        gone.update(str(i.metadata.get(DELETED)) for i in page)
        if len(page) < MAX_TOP_K:
            return gone & wanted
        offset += MAX_TOP_K


async def _find(
    backend: AsyncBackend, cube: str, app_name: str, memory_id: str
) -> list[MemoryItem]:
    """The app's memory of ``memory_id``: an ADK id, or a memstrata item id."""
    found: list[MemoryItem] = await backend.list_memories(
        cube, filters={"metadata": {APP: app_name, ID: memory_id}}, limit=10
    )
    if found:
        return found
    try:
        item = await backend.get(memory_id, cube_id=cube)
    except (NotFoundError, ValidationError):
        return []
    return [item] if item.metadata.get(APP) == app_name else []


def _turn(
    app_name: str, record: Event | MemoryEntry, custom: Mapping[str, object] | None
) -> dict[str, Any] | None:
    """An event or memory entry as an ``add`` message, or None when it has no text."""
    content = record.content
    text = _text(content)
    if not text.strip():
        return None
    author = record.author
    stamp = record.timestamp
    when = stamp if isinstance(stamp, float) else _epoch(stamp)
    identity = record.id or mapping.digest(app_name, text, str(author), str(when))
    metadata: dict[str, Any] = {
        APP: app_name, ID: identity, AUTHOR: author, TIME: when,
        CONTENT: content.model_dump(mode="json", exclude_none=True) if content else None,
    }  # fmt: skip
    extra = dict(custom or {})
    if isinstance(record, MemoryEntry):
        extra.update(record.custom_metadata)
    if extra:
        metadata[CUSTOM] = extra
    turn: dict[str, Any] = {
        "id": f"adk:{mapping.digest(app_name, identity)}"[:MAX_EXTERNAL_ID],
        "role": "user" if author == USER else "assistant",
        "content": text,
        "metadata": metadata,
    }
    if author and author != USER:
        turn["name"] = author
    if when is not None:
        turn["timestamp"] = when
    return turn


def _entry(item: MemoryItem) -> MemoryEntry:
    """The ``MemoryEntry`` an item holds (one added by another surface: its text)."""
    meta = item.metadata
    raw = meta.get(CONTENT)
    content = (
        types.Content.model_validate(raw)
        if isinstance(raw, dict)
        else types.Content(role="user", parts=[types.Part(text=item.text)])
    )
    when = meta.get(TIME)
    author = meta.get(AUTHOR)
    custom = meta.get(CUSTOM)
    return MemoryEntry(
        id=str(meta.get(ID) or item.id),
        content=content,
        author=author if isinstance(author, str) else item.speaker,
        timestamp=datetime.fromtimestamp(when).isoformat()
        if isinstance(when, (int, float))
        else item.event_time.isoformat(),
        custom_metadata=custom if isinstance(custom, dict) else {},
    )


def _text(content: types.Content | None) -> str:
    """The text parts of ``content``, joined by spaces (as ADK's own memory reads them)."""
    if content is None or not content.parts:
        return ""
    return " ".join(p.text for p in content.parts if p.text)


def _epoch(stamp: str | None) -> float | None:
    """An ISO 8601 time as epoch seconds (None for none or a malformed one)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None
