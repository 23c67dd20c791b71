"""LlamaIndex over memstrata: ``MemstrataMemoryBlock``, a long-term ``BaseMemoryBlock`` for
``llama_index.core.memory.Memory``.  Needs the ``llamaindex`` extra;
docs/integrations/llamaindex.md has the mapping and an example.

Mapping (``memstrata.integrations.mapping``):

* One block is one user (``user_id=``) in one cube (``cube_id=``, or the user's default cube).
* ``aput`` (what ``Memory`` flushes out of its short-term queue) adds each message with text as
  a turn: its role (``tool`` as ``tool_result``), its text blocks' text, and its session, the
  ``Memory``'s ``session_id`` (kept when it is a valid memstrata id, else a stable digest of it,
  prefixed ``li-``).  The turns are memories like any other: searchable, read by the tiers.
* ``aget`` works as LlamaIndex's ``VectorMemoryBlock``: the text of the last
  ``retrieval_context_window`` messages is the query, memstrata's hybrid search over the cube
  finds the ``similarity_top_k`` best memories, and ``format_template`` renders their texts
  (one per paragraph); no messages or no memories is ``""``.  Unlike the vector block it reads
  every session of the user, not only the ``Memory``'s own: what was said in one chat is
  recalled in the next.
* ``atruncate`` drops the last (least relevant) memories until about ``tokens_to_truncate``
  words are gone (a hint: ``Memory`` counts with its own tokenizer); all of them is None.

Each call runs the sync logic off the event loop (``mapping.Backend.offload``): an
``AsyncMemoryOS`` or ``AsyncClient`` is awaited on the caller's loop.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate, RichPromptTemplate

from memstrata.integrations import mapping

__all__ = ["MemstrataMemoryBlock"]

#: The separator of the memories in a block's text (``atruncate`` cuts at it).
SEPARATOR = "\n\n"
#: LlamaIndex message roles and the roles memstrata stores them as.
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class MemstrataMemoryBlock(BaseMemoryBlock[str]):
    """A ``Memory`` block that remembers in memstrata and recalls by its search (see the module
    docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``
    (``mapping.Backend``); ``user_id`` the acting user (created if missing; with a client, its
    key's owner, and may be omitted); ``cube_id`` the cube (created, owned by the user, if
    missing; default: the user's default cube; one the user may not read is
    ``PermissionDenied``).  The other fields are ``BaseMemoryBlock``'s and
    ``VectorMemoryBlock``'s.
    """

    name: str = Field(default="MemstrataMemory", description="The name of the memory block.")
    similarity_top_k: int = Field(default=5, ge=1, description="Memories to recall.")
    retrieval_context_window: int = Field(
        default=5, ge=1, description="Latest messages whose text is the query."
    )
    format_template: BasePromptTemplate = Field(
        default=RichPromptTemplate("{{ text }}"),
        description="Template for the recalled memories (its variable: text).",
    )
    _backend: mapping.Backend = PrivateAttr()

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        cube_id: str | None = None,
        **fields: Any,
    ) -> None:
        template = fields.get("format_template")
        if isinstance(template, str):  # a string is a template, as VectorMemoryBlock reads one
            rich = "{{" in template
            fields["format_template"] = (RichPromptTemplate if rich else PromptTemplate)(template)
        super().__init__(**fields)
        self._backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)

    @property
    def backend(self) -> mapping.Backend:
        """What the block calls: its user's view of the memory."""
        return self._backend

    @property
    def user_id(self) -> str:
        """The acting user."""
        return self._backend.user_id

    @property
    def cube_id(self) -> str:
        """The block's cube."""
        return self._backend.cube_id

    # -- BaseMemoryBlock -----------------------------------------------------------------------

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The memories relevant to the latest messages, rendered; ``""`` when none."""
        query = _text(list(messages or [])[-self.retrieval_context_window :])
        if not query.strip():
            return ""
        texts = await self._backend.offload(self._recall, query)
        if not texts:
            return ""
        return str(self.format_template.format(text=SEPARATOR.join(texts)))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Add the messages with text as turns of their session, one call per session (``Memory``
        flushes one session's: all or none)."""
        sessions: dict[str | None, list[dict[str, Any]]] = {}
        for message in messages:
            turn = _turn(message)
            if turn is not None:
                sessions.setdefault(turn.pop("session"), []).append(turn)
        if sessions:
            await self._backend.offload(self._remember, sessions)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """``content`` less its last memories, about ``tokens_to_truncate`` words fewer; None
        when that is all of it."""
        parts = content.split(SEPARATOR)
        dropped = 0
        while parts and dropped < tokens_to_truncate:
            dropped += len(parts.pop().split())
        return SEPARATOR.join(parts) if parts else None

    # -- the sync logic --------------------------------------------------------------------------

    def _recall(self, query: str) -> list[str]:
        backend = self._backend
        hits = backend.search(query, cube_ids=[backend.cube_id], top_k=self.similarity_top_k)
        return [h.item.text for h in hits]

    def _remember(self, sessions: dict[str | None, list[dict[str, Any]]]) -> None:
        for session, turns in sessions.items():
            self._backend.add(turns, cube_id=self._backend.cube_id, session_id=session)


def _turn(message: ChatMessage) -> dict[str, Any] | None:
    """``message`` as an ``add`` message (with its ``session``), or None when it has no text."""
    text = _text([message])
    if not text.strip():
        return None
    role = str(getattr(message.role, "value", message.role))
    session = message.additional_kwargs.get("session_id")
    return {
        "role": "tool_result" if role == "tool" else ROLES.get(role, role),
        "content": text,
        "session": None if session is None else mapping.line_id(str(session), "li"),
    }


def _text(messages: list[ChatMessage]) -> str:
    """The text blocks of ``messages``, as ``VectorMemoryBlock`` joins them."""
    return " ".join(
        "".join(b.text for b in m.blocks if isinstance(b, TextBlock)) for m in messages
    ).strip()
