"""``Client``'s read calls: ``/search``, ``/context``, ``/chat``, ``/chat/stream``, the profile,
the preferences."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import httpx

from memstrata.client.errors import ServerUnreachable, error_for, unreachable
from memstrata.client.transport import (
    Exchange,
    Requests,
    ServerEvents,
    When,
    load_as,
    read,
    time_param,
)
from memstrata.model import Hit, Preference, ProfileAttribute
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply
from memstrata.wire import chat_reply_from_wire, context_from_wire, hit_from_wire


class Reading:
    """Search, context, chat, profile and preferences as exchanges (``client.transport``)."""

    def __init__(self) -> None:
        self._http = Requests()

    def search(
        self,
        query: str,
        *,
        cube_ids: Sequence[str] | None = None,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        include: Sequence[str] | None = None,
        as_of: When | None = None,
        explain: bool = False,
    ) -> Exchange[list[Hit]]:
        """Hybrid search over ``cube_ids`` (default: every cube the caller may read), best first.

        ``include`` adds ``merged``, ``archived`` or ``frozen`` items; with ``as_of`` (a past
        time) the search answers as the memory stood then.  Each hit's item is whole; with
        ``explain`` each hit's ``parts`` say what its score is made of (else they are empty).
        """
        body: dict[str, Any] = {
            "query": query, "cube_ids": cube_ids, "top_k": top_k, "filters": filters,
            "include": include, "as_of": None if as_of is None else time_param(as_of),
        }  # fmt: skip
        if explain:  # sent only when asked: a server older than explain refuses the field
            body["explain"] = True
        return [
            read(hit_from_wire, h)
            for h in (yield from self._http.json("POST", "/search", body=body))["hits"]
        ]

    def context(
        self,
        query: str,
        *,
        budget_tokens: int = 1000,
        cube_ids: Sequence[str] | None = None,
        session_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        expand_sources: bool = True,
        chain: bool = True,
    ) -> Exchange[Context]:
        """The memories for ``query`` packed into ``budget_tokens`` (``MemoryOS.context``)."""
        body = {
            "query": query, "budget_tokens": budget_tokens, "cube_ids": cube_ids,
            "session_id": session_id, "filters": filters, "expand_sources": expand_sources,
            "chain": chain,
        }  # fmt: skip
        return read(context_from_wire, (yield from self._http.json("POST", "/context", body=body)))

    def chat(
        self,
        query: str,
        *,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> Exchange[ChatReply]:
        """Answer from memory with the server's chat model; the exchange is stored in ``cube_id``.

        ``LLMNotConfigured`` without a chat model, ``LLMError`` when it fails.
        """
        body = _chat_body(query, cube_id, session_id, budget_tokens, max_tokens)
        return read(chat_reply_from_wire, (yield from self._http.json("POST", "/chat", body=body)))

    def chat_stream(
        self,
        query: str,
        *,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> Exchange[Pieces]:
        """``chat`` as the answer's pieces, as the model writes them (server-sent events).

        The request is sent, and its errors raised, here; a failure later in the stream is
        raised by the iterator.  The server stores the exchange after the last piece: read the
        iterator to its end (or close it, to stop early and store nothing).
        """
        body = _chat_body(query, cube_id, session_id, budget_tokens, max_tokens)
        response = yield from self._http.send("POST", "/chat/stream", body=body, stream=True)
        return Pieces(response)

    def get_profile(self, *, cube_id: str | None = None) -> Exchange[list[ProfileAttribute]]:
        """The caller's current profile attributes in ``cube_id`` (or every readable cube)."""
        params = {} if cube_id is None else {"cube_id": cube_id}
        found = yield from self._http.json("GET", "/users/me/profile", params=params)
        return [load_as(ProfileAttribute, a) for a in found]

    def get_preferences(self, *, cube_id: str | None = None) -> Exchange[list[Preference]]:
        """The caller's current preferences in ``cube_id`` (or every readable cube), each with
        its evidence (``MemoryOS.get_preferences``)."""
        params = {} if cube_id is None else {"cube_id": cube_id}
        found = yield from self._http.json("GET", "/users/me/preferences", params=params)
        return [load_as(Preference, p) for p in found]


def _chat_body(
    query: str, cube_id: str, session_id: str | None, budget_tokens: int, max_tokens: int
) -> dict[str, Any]:
    return {
        "query": query, "cube_id": cube_id, "session_id": session_id,
        "budget_tokens": budget_tokens, "max_tokens": max_tokens,
    }  # fmt: skip


class Pieces(Iterator[str], AsyncIterator[str]):
    """The ``delta`` texts of an open ``/chat/stream`` response, as the server sends them: an
    iterator over ``Client``'s response, an async iterator over ``AsyncClient``'s.

    An ``error`` event raises its error; a stream that ends before its ``done`` event is
    ``ServerUnreachable``.  The response is closed at the end, on an error, or by ``close`` /
    ``aclose`` (stopping early: the server then stores nothing).
    """

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._events = ServerEvents()
        self._lines: Iterator[str] | None = None
        self._alines: AsyncIterator[str] | None = None
        self._over = False

    def __iter__(self) -> Pieces:
        return self

    def __next__(self) -> str:
        try:
            while not self._over:
                self._lines = self._lines or self._response.iter_lines()
                piece = self._piece(next(self._lines, None))
                if piece is not None:
                    return piece
        except httpx.TransportError as exc:
            self.close()
            raise self._unreachable(exc) from exc
        except BaseException:
            self.close()
            raise
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Stop reading and release the connection (``Client``'s)."""
        self._over = True
        self._response.close()

    def __aiter__(self) -> Pieces:
        return self

    async def __anext__(self) -> str:
        try:
            while not self._over:
                self._alines = self._alines or self._response.aiter_lines()
                piece = self._piece(await anext(self._alines, None))
                if piece is not None:
                    return piece
        except httpx.TransportError as exc:
            await self.aclose()
            raise self._unreachable(exc) from exc
        except BaseException:
            await self.aclose()
            raise
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop reading and release the connection (``AsyncClient``'s)."""
        self._over = True
        await self._response.aclose()

    def _piece(self, line: str | None) -> str | None:
        """The piece ``line`` ends, if any (None: the stream ended); the end ends the reading."""
        event = self._events.feed("" if line is None else line)  # a blank line ends the last
        name, data = event if event is not None else ("", {})
        if name == "delta":
            return str(data["text"])
        if name == "error":
            detail = data["error"]
            raise error_for(502, detail["code"], detail["message"], detail.get("hint"))
        if name == "done":
            self._over = True
        elif line is None:
            raise ServerUnreachable("the answer stream ended before its done event")
        return None

    def _unreachable(self, exc: httpx.TransportError) -> ServerUnreachable:
        return unreachable("POST", self._response.request.url, exc)
