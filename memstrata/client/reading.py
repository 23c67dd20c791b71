"""``Client``'s read calls: ``/search``, ``/context``, ``/chat``, ``/chat/stream``, the profile,
the preferences."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from memstrata.client.errors import ServerUnreachable, error_for, unreachable
from memstrata.client.transport import Transport, When, load_as, read, sse_events, time_param
from memstrata.model import Hit, Preference, ProfileAttribute
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply
from memstrata.wire import chat_reply_from_wire, context_from_wire, hit_from_wire


class Reading:
    """Search, context, chat, profile and preferences over one ``Transport``."""

    def __init__(self, transport: Transport) -> None:
        self._http = transport

    def search(
        self,
        query: str,
        *,
        cube_ids: Sequence[str] | None = None,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        include: Sequence[str] | None = None,
        as_of: When | None = None,
    ) -> list[Hit]:
        """Hybrid search over ``cube_ids`` (default: every cube the caller may read), best first.

        ``include`` adds ``merged``, ``archived`` or ``frozen`` items; with ``as_of`` (a past
        time) the search answers as the memory stood then.  Each hit's item is whole.
        """
        body = {
            "query": query, "cube_ids": cube_ids, "top_k": top_k, "filters": filters,
            "include": include, "as_of": None if as_of is None else time_param(as_of),
        }  # fmt: skip
        return [
            read(hit_from_wire, h) for h in self._http.json("POST", "/search", body=body)["hits"]
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
    ) -> Context:
        """The memories for ``query`` packed into ``budget_tokens`` (``MemoryOS.context``)."""
        body = {
            "query": query, "budget_tokens": budget_tokens, "cube_ids": cube_ids,
            "session_id": session_id, "filters": filters, "expand_sources": expand_sources,
            "chain": chain,
        }  # fmt: skip
        return read(context_from_wire, self._http.json("POST", "/context", body=body))

    def chat(
        self,
        query: str,
        *,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> ChatReply:
        """Answer from memory with the server's chat model; the exchange is stored in ``cube_id``.

        ``LLMNotConfigured`` without a chat model, ``LLMError`` when it fails.
        """
        body = _chat_body(query, cube_id, session_id, budget_tokens, max_tokens)
        return read(chat_reply_from_wire, self._http.json("POST", "/chat", body=body))

    def chat_stream(
        self,
        query: str,
        *,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> Iterator[str]:
        """``chat`` as the answer's pieces, as the model writes them (server-sent events).

        The request is sent, and its errors raised, here; a failure later in the stream is
        raised by the iterator.  The server stores the exchange after the last piece: read the
        iterator to its end (or close it, to stop early and store nothing).
        """
        body = _chat_body(query, cube_id, session_id, budget_tokens, max_tokens)
        response = self._http.request("POST", "/chat/stream", body=body, stream=True)
        return _pieces(response)

    def get_profile(self, *, cube_id: str | None = None) -> list[ProfileAttribute]:
        """The caller's current profile attributes in ``cube_id`` (or every readable cube)."""
        params = {} if cube_id is None else {"cube_id": cube_id}
        found = self._http.json("GET", "/users/me/profile", params=params)
        return [load_as(ProfileAttribute, a) for a in found]

    def get_preferences(self, *, cube_id: str | None = None) -> list[Preference]:
        """The caller's current preferences in ``cube_id`` (or every readable cube), each with
        its evidence (``MemoryOS.get_preferences``)."""
        params = {} if cube_id is None else {"cube_id": cube_id}
        found = self._http.json("GET", "/users/me/preferences", params=params)
        return [load_as(Preference, p) for p in found]


def _chat_body(
    query: str, cube_id: str, session_id: str | None, budget_tokens: int, max_tokens: int
) -> dict[str, Any]:
    return {
        "query": query, "cube_id": cube_id, "session_id": session_id,
        "budget_tokens": budget_tokens, "max_tokens": max_tokens,
    }  # fmt: skip


def _pieces(response: httpx.Response) -> Iterator[str]:
    """The ``delta`` texts of a ``/chat/stream`` response; an ``error`` event raises."""
    try:
        for name, data in sse_events(response.iter_lines()):
            if name == "delta":
                yield str(data["text"])
            elif name == "error":
                detail = data["error"]
                raise error_for(502, detail["code"], detail["message"], detail.get("hint"))
            elif name == "done":
                return
    except httpx.TransportError as exc:
        raise unreachable("POST", response.request.url, exc) from exc
    finally:  # at the end, on an error, or when the caller closes the iterator early
        response.close()
    raise ServerUnreachable("the answer stream ended before its done event")
