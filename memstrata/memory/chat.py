"""Chat from memory: context → chat model → answer, the exchange remembered.

``MemoryOS`` delegates here.  One model call per chat, counted against the cube the exchange
is stored in.  Without a chat model every call is ``LLMNotConfigured``, saying how to configure
one; search and context still work.
"""

from __future__ import annotations

from collections.abc import Iterator

from memstrata.errors import LLMError, LLMNotConfigured
from memstrata.limits import MAX_CHAT_TOKENS
from memstrata.llm import LLM, ChatMessage, Completion
from memstrata.llm.local import Activation, LocalChat
from memstrata.memory.access import check_id, check_int
from memstrata.memory.components import Components
from memstrata.memory.items import Items
from memstrata.memory.reading import Reading
from memstrata.model import utcnow
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply, chat_messages


class Chat:
    """``MemoryOS``'s ``chat`` and ``chat_stream`` over its reading and item parts."""

    def __init__(self, parts: Components, reading: Reading, items: Items) -> None:
        self._parts = parts
        self._reading = reading
        self._items = items

    def chat(
        self,
        query: str,
        *,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
        use_adapter: bool = False,
    ) -> ChatReply:
        """Answer ``query`` from memory with the chat model, and remember the exchange.

        The context comes from every cube ``user_id`` may read (``context``); the question and the
        answer are stored in ``cube_id`` (needs ``write``) as two turns of ``session_id``.  One LLM
        call, counted against ``cube_id``.  ``LLMNotConfigured`` without a chat model; an
        ``LLMError`` stores nothing.  With ``use_adapter`` the same prompt is answered by the base
        model of ``cube_id``'s LoRA adapter with the adapter on (``memory.parametric``; needs the
        ``adapt`` extra, no chat model; without an adapter, by the base model alone).
        """
        if use_adapter:
            return self._with_adapter(
                query, user_id, cube_id, session_id, budget_tokens, max_tokens
            )
        llm, messages, ctx, cached = self._prompt(
            query, user_id, cube_id, session_id, budget_tokens, max_tokens
        )
        if cached is not None and isinstance(llm, LocalChat):
            completion = llm.complete(messages, max_tokens=max_tokens, activation=cached[1])
        else:
            completion = llm.complete(messages, max_tokens=max_tokens)
        self._count(cube_id, completion)
        ids = self._remember(query, completion.text, user_id, cube_id, session_id)
        used = cached[0] if cached is not None else None
        return ChatReply(answer=completion.text, ids=ids, context=ctx, activation=used)

    def chat_stream(
        self,
        query: str,
        *,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> Iterator[str]:
        """``chat`` as the answer's pieces, as the model writes them.

        Everything is checked before the first piece; the exchange is stored after the last one
        (a stream abandoned part-way stores nothing).  Token counts of a stream are not reported
        by every server; the call is counted with what was reported (often zero tokens).
        """
        llm, messages, _, cached = self._prompt(
            query, user_id, cube_id, session_id, budget_tokens, max_tokens
        )
        if cached is not None and isinstance(llm, LocalChat):
            stream = llm.stream(messages, max_tokens=max_tokens, activation=cached[1])
        else:
            stream = llm.stream(messages, max_tokens=max_tokens)

        def pieces() -> Iterator[str]:
            answer: list[str] = []
            for piece in stream:
                answer.append(piece)
                yield piece
            self._count(cube_id, Completion(text="".join(answer)))
            self._remember(query, "".join(answer), user_id, cube_id, session_id)

        return pieces()

    def _with_adapter(
        self,
        query: str,
        user_id: str,
        cube_id: str,
        session_id: str | None,
        budget_tokens: int,
        max_tokens: int,
    ) -> ChatReply:
        """``chat`` answered through the cube's LoRA adapter (transformers, in this thread)."""
        self._check(user_id, cube_id, session_id, max_tokens)
        ctx = self._reading.context(
            query, user_id=user_id, budget_tokens=budget_tokens, session_id=session_id
        )
        messages = chat_messages(query, ctx, utcnow())
        answer = self._parts.parametric.chat(cube_id, messages, max_tokens)
        self._count(cube_id, Completion(text=answer))
        ids = self._remember(query, answer, user_id, cube_id, session_id)
        return ChatReply(answer=answer, ids=ids, context=ctx)

    def _prompt(
        self,
        query: str,
        user_id: str,
        cube_id: str,
        session_id: str | None,
        budget_tokens: int,
        max_tokens: int,
    ) -> tuple[LLM, list[ChatMessage], Context, tuple[str, Activation] | None]:
        """Check everything a chat needs, then build its prompt (no model call yet), and find
        the cube's KV cache for it: (artifact id, state), or None."""
        self._check(user_id, cube_id, session_id, max_tokens)
        llm = self._parts.llm
        if llm is None:
            raise LLMNotConfigured("chat")
        ctx = self._reading.context(
            query, user_id=user_id, budget_tokens=budget_tokens, session_id=session_id
        )
        activation = self._parts.activation
        stable = activation.stable(cube_id)
        found = activation.lookup(cube_id, stable)
        cached = (found[0].artifact_id, found[1]) if found is not None else None
        return llm, chat_messages(query, ctx, utcnow(), stable.text), ctx, cached

    def _check(self, user_id: str, cube_id: str, session_id: str | None, max_tokens: int) -> None:
        """What every chat checks first: its bounds and ``write`` on ``cube_id``."""
        check_int(max_tokens, "max_tokens", 1, MAX_CHAT_TOKENS)
        if session_id is not None:
            check_id(session_id, "session_id")
        self._parts.access.cube(user_id, cube_id, "write")

    def _count(self, cube_id: str, completion: Completion) -> None:
        self._parts.store.record_usage(
            cube_id, completion.prompt_tokens, completion.completion_tokens
        )

    def _remember(
        self, query: str, answer: str, user_id: str, cube_id: str, session_id: str | None
    ) -> list[str]:
        if not answer.strip():
            raise LLMError("the chat model answered with empty text", hint="try again")
        exchange = [
            {"role": "user", "name": user_id, "content": query},
            {"role": "assistant", "name": "assistant", "content": answer},
        ]
        return self._items.add(exchange, user_id=user_id, cube_id=cube_id, session_id=session_id)
