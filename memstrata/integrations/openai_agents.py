"""The OpenAI Agents SDK over memstrata: ``MemstrataSession``, the SDK's ``Session`` protocol
kept as a memstrata session, and ``memory_tools``, function tools to search and add long-term
memory.  Needs the ``openai-agents`` extra; docs/integrations/openai-agents.md has the mapping
and an example.

Mapping (``memstrata.integrations.mapping``):

* A session is the memstrata session ``session_id`` (kept as it is when it is a valid memstrata
  id, else a stable digest of it, prefixed ``oa-``) of one cube (``cube_id=``, or the user's
  default cube), read and written as ``user_id``.
* An item (the SDK's input item: a message, a function call, its output, …) is one turn: its
  text is a message's text or a tool's output (a call's is ``(tool call: NAME)``: its arguments
  are not memories), its role the message's (``developer`` as ``system``), ``tool_call`` for a
  call and ``tool_result`` for an output; the rest of the item is kept in the turn's metadata
  (``oa.item``), so ``get_items`` returns each item as it was added.  The turns are memories
  like any other: searchable, read by the tiers.
* ``get_items(limit)`` is the latest ``limit`` items, oldest first (``session_settings.limit``
  when none is given; as in ``SQLiteSession``, 0 is none and a negative limit all);
  ``pop_item`` erases the newest turn and returns its item; ``clear_session`` erases the
  session.  Erasing is for good: the turns and what the tiers derived from them.
* ``memory_tools`` are ``search_memory(query)`` (memstrata's hybrid search over the cube, the
  best few as JSON) and ``remember(text)`` (a note added to the cube as the user's turn).

Every call runs the sync logic off the event loop (``mapping.Backend.offload``): an
``AsyncMemoryOS`` or ``AsyncClient`` is awaited on the caller's loop.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from agents import FunctionTool, function_tool
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit

from memstrata.integrations import mapping
from memstrata.model import MemoryItem

__all__ = ["MemstrataSession", "memory_tools"]

#: The metadata key holding an item (less the field its turn's text holds).
ITEM, FIELD = "oa.item", "oa.field"
#: The text of an item that has none: turns need text.
NO_TEXT = "(no text)"
#: Message roles and the roles memstrata stores them as.
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
#: Hits ``search_memory`` returns unless told.
SEARCH_HITS = 5


class MemstrataSession(mapping.OnBackend):
    """The Agents SDK's ``Session`` kept as a memstrata session (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``
    (``mapping.Backend``); ``user_id`` the acting user (created if missing; with a client, its
    key's owner, and may be omitted); ``session_id`` the SDK's session id; ``cube_id`` the cube
    (created, owned by the user, if missing; default: the user's default cube; one the user may
    not read is ``PermissionDenied``); ``session_settings`` the SDK's (its ``limit`` is
    ``get_items``' default).
    """

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        session_id: str,
        cube_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.memory = memory
        self.backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.session = mapping.line_id(session_id, "oa")

    # -- the Session protocol ------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` items (default ``session_settings.limit``; None or a negative
        limit: all), oldest first."""
        wanted = resolve_session_limit(limit, self.session_settings)
        return await self.backend.offload(self._items, wanted)

    async def add_items(self, items: list[Any]) -> None:
        """Add ``items`` as turns of the session, in one call (all or none)."""
        if items:
            await self.backend.offload(self._add, list(items))

    async def pop_item(self) -> Any | None:
        """Erase the newest item and return it; None when the session is empty."""
        return await self.backend.offload(self._pop)

    async def clear_session(self) -> None:
        """Erase the session: its turns and what was derived from them, for good."""
        await self.backend.offload(self._clear)

    # -- the sync logic --------------------------------------------------------------------------

    def _items(self, limit: int | None) -> list[Any]:
        if limit == 0:
            return []
        turns: Iterator[MemoryItem] = self._turns()
        if limit is not None and limit > 0:
            turns = iter(deque(turns, maxlen=limit))
        return [_item(t) for t in turns]

    def _add(self, items: list[Any]) -> None:
        self.backend.add([_turn(i) for i in items], cube_id=self.cube_id, session_id=self.session)

    def _pop(self) -> Any | None:
        newest = deque(self._turns(), maxlen=1)
        if not newest:
            return None
        turn = newest[0]
        self.backend.erase(turn.id, cube_id=self.cube_id, reason="Agents SDK session pop_item")
        return _item(turn)

    def _clear(self) -> None:
        self.backend.erase(
            cube_id=self.cube_id, session_id=self.session, reason="Agents SDK session cleared"
        )

    def _turns(self) -> Iterator[MemoryItem]:
        return self.backend.session_turns(self.session)


def memory_tools(
    memory: mapping.Memory, *, user_id: str | None = None, cube_id: str | None = None
) -> list[FunctionTool]:
    """Function tools over ``user_id``'s memory cube (``cube_id=`` or the default one):
    ``search_memory`` and ``remember`` (see the module docs).  An error of memstrata (a bad
    query, a note too long) reaches the model as the tool's error text, as the SDK does for any
    tool."""
    backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)

    def search(query: str) -> str:
        hits = backend.search(query, cube_ids=[backend.cube_id], top_k=SEARCH_HITS)
        found = [{"text": h.item.text, "when": h.item.event_time.date().isoformat()} for h in hits]
        return json.dumps(found, ensure_ascii=False)

    def add(text: str) -> str:
        (item_id,) = backend.add([{"role": "user", "content": text}], cube_id=backend.cube_id)
        return json.dumps({"remembered": item_id})

    async def search_memory(query: str) -> str:
        """Search the user's long-term memory for what is known about a topic.

        Args:
            query: What to look for, in plain words (a question or a few keywords).
        """
        return await backend.offload(search, query)

    async def remember(text: str) -> str:
        """Save a fact about the user to long-term memory, for later conversations.

        Args:
            text: The fact, as one short sentence (e.g. "Ann lives in Porto").
        """
        return await backend.offload(add, text)

    return [function_tool(search_memory), function_tool(remember)]


def _turn(item: Any) -> dict[str, Any]:
    """``item`` as an ``add`` message: its text, role and (less the text) the item itself."""
    if not isinstance(item, Mapping):
        item = json.loads(json.dumps(item, default=_plain))  # a pydantic item: its JSON form
    rest = dict(item)
    kind = rest.get("type", "message" if "role" in rest else None)
    field = "output" if "output" in rest else "content"
    value = rest.get(field)
    text = value if isinstance(value, str) else _text(value)
    if kind == "function_call":
        text = f"(tool call: {rest.get('name')})"
    metadata: dict[str, Any] = {ITEM: rest}
    if isinstance(value, str) and value.strip():
        metadata[FIELD] = field
        rest.pop(field)  # the turn's text holds it
    if kind == "message" or (kind is None and "role" in rest):
        role = ROLES.get(str(item.get("role")), "user")
    else:
        role = "tool_result" if field == "output" else "tool_call"
    return {"content": text if text.strip() else NO_TEXT, "role": role, "metadata": metadata}


def _item(turn: MemoryItem) -> Any:
    """The item a turn holds: as it was added, or (added by another surface) a message."""
    stored = turn.metadata.get(ITEM)
    if not isinstance(stored, dict):
        role = turn.role if turn.role in ROLES else "user"
        return {"role": role, "content": turn.text}
    item = dict(stored)
    field = turn.metadata.get(FIELD)
    if isinstance(field, str):
        item[field] = turn.text
    return item


def _text(content: Any) -> str:
    """The text of a list of content parts (``input_text``, ``output_text``…), one per line."""
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(part.get("text")) for part in content if isinstance(part, Mapping) and "text" in part
    )


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    raise TypeError(f"an item of type {type(value).__name__} is not JSON")
