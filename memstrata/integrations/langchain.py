"""LangChain over memstrata: ``MemstrataChatMessageHistory``, a ``BaseChatMessageHistory`` whose
messages are turns of a memstrata session.  Needs the ``langchain`` extra;
docs/integrations/langchain.md has the mapping and an example.

Mapping (``memstrata.integrations.mapping``):

* The history is the session ``session_id`` (kept as it is when it is a valid memstrata id,
  else a stable digest of it) of one cube (``cube_id=``, or the user's default cube), read and
  written as ``user_id``.
* A message is one turn (``add``): its text is the message's text, its role ``user``,
  ``assistant``, ``system`` or ``tool_result``; the rest of the message (LangChain's
  ``message_to_dict``, less the text) is kept in the turn's metadata (``lc.message``), so
  tool calls, ids and names come back as they went in.  The turns are memories like any other:
  searchable, read by the tiers.  Turns of the session added by other surfaces are messages of
  the history too (rebuilt from their role and text).
* ``messages`` are the session's turns in the order they were added; ``clear`` erases the
  session (the turns and what the tiers derived from them, for good).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)

from memstrata.integrations import mapping
from memstrata.model import MemoryItem

__all__ = ["MemstrataChatMessageHistory"]

#: The metadata key holding a message's LangChain form (less its text).
MESSAGE = "lc.message"
#: LangChain message types and the roles memstrata stores them as.  A tool's result is a
#: turn of role ``tool_result``, kept whole for the history to replay (the core reads a
#: ``tool`` turn as the OpenAI format's tool result, which it summarises).
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool_result"}
#: The text of a message that has none (an AI message with tool calls only): turns need text.
NO_TEXT = "(no text)"


class MemstrataChatMessageHistory(mapping.OnBackend, BaseChatMessageHistory):
    """A LangChain chat history kept as a memstrata session (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``
    (``mapping.Backend``); ``user_id`` the acting user (created if missing; with a client, its
    key's owner, and may be omitted); ``session_id`` the history; ``cube_id`` the cube (created,
    owned by the user, if missing; default: the user's default cube; one the user may not read
    is ``PermissionDenied``).  With an ``AsyncClient`` use the async forms.
    """

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        session_id: str,
        cube_id: str | None = None,
    ) -> None:
        self.memory = memory
        self.backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)
        self.session_id = session_id
        self.session = mapping.line_id(session_id, "lc")

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override,unused-ignore]
        """The session's messages, oldest first."""
        return [_message(item) for item in self._turns()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Add ``messages`` as turns of the session, in one call (all or none)."""
        if not messages:
            return
        self.backend.add(
            [_turn(m) for m in messages], cube_id=self.cube_id, session_id=self.session
        )

    def clear(self) -> None:
        """Erase the session: its turns and what was derived from them, for good."""
        self.backend.erase(
            cube_id=self.cube_id, session_id=self.session, reason="LangChain chat history cleared"
        )

    # The async forms run the same logic off the event loop (``mapping.Backend.offload``):
    # an async memory's calls are awaited on the caller's loop.

    async def aget_messages(self) -> list[BaseMessage]:
        return await self.backend.offload(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await self.backend.offload(self.add_messages, list(messages))

    async def aclear(self) -> None:
        await self.backend.offload(self.clear)

    def _turns(self) -> Iterator[MemoryItem]:
        return self.backend.session_turns(self.session)


def _turn(message: BaseMessage) -> dict[str, Any]:
    """``message`` as an ``add`` message: its text, role and (less the text) LangChain form."""
    form = message_to_dict(message)
    content = form["data"].get("content")
    text = content if isinstance(content, str) else message.text
    if isinstance(content, str) and content.strip():
        form["data"].pop("content")  # the turn's text holds it
    turn: dict[str, Any] = {
        "content": text if text.strip() else NO_TEXT,
        "role": ROLES.get(message.type, getattr(message, "role", None) or message.type),
        "metadata": {MESSAGE: form},
    }
    if message.name:
        turn["name"] = message.name
    return turn


def _message(item: MemoryItem) -> BaseMessage:
    """The message a turn holds: its LangChain form when it has one, else from role and text."""
    form = item.metadata.get(MESSAGE)
    if isinstance(form, dict) and isinstance(form.get("data"), dict):
        data = dict(form["data"])
        if "content" not in data:
            data["content"] = item.text
        return messages_from_dict([{"type": form.get("type"), "data": data}])[0]
    role = item.role or "user"
    if role == "user":
        return HumanMessage(content=item.text, name=item.speaker)
    if role == "assistant":
        return AIMessage(content=item.text, name=item.speaker)
    if role == "system":
        return SystemMessage(content=item.text)
    return ChatMessage(role=role, content=item.text)
