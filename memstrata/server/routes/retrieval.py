"""Reading memory: ``/search``, ``/context``, ``/chat`` and ``/chat/stream``."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from fastapi import Response
from fastapi.responses import StreamingResponse

from memstrata.errors import MemstrataError, ValidationError
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import check_self, make_router
from memstrata.server.schemas import (
    ChatIn,
    ChatOut,
    ContextIn,
    ContextOut,
    ErrorBody,
)
from memstrata.server.search_schemas import ExplainedHitOut, SearchIn, SearchOut

router = make_router("retrieval")

_LLM_ERRORS: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorBody, "description": "The chat model failed (unreachable, timed out)"},
    503: {"model": ErrorBody, "description": "No chat model is configured"},
}
_EVENTS = """Server-sent events: `event: delta` with `data: {"text": "…"}` for each piece of the
answer, then `event: done` with `data: {}`; a failure after the stream began is
`event: error` with `data: {"error": {"code", "message"}}`."""


# The answer is serialized here, in the route's thread, and returned as a ``Response``, which
# FastAPI sends as it is: left to FastAPI, a sync route's return value is validated again in a
# second thread-pool hop, then dumped on the event loop (``bench/rest_overhead.py``).
# ``exclude_unset``: a hit's ``parts`` are set only with ``explain``, so the default answer
# has no ``parts`` key at all (its size unchanged), not an empty or null one.
@router.post(
    "/search",
    summary="Hybrid search over the caller's cubes, best first",
    response_model=SearchOut,
    response_model_exclude_unset=True,
)
def search(body: SearchIn, memory: Memory, user: Caller) -> Response:
    """Keyword and vector search fused; ``cube_ids`` default to every cube the caller may read.

    ``include`` adds merged, archived or frozen items; ``as_of`` searches the memory as it stood
    at that time (a time in the future is a 422); ``explain`` gives each hit its ``parts``, what
    its score is made of (the channels' shares, then each adjustment, summing to ``score``).
    """
    check_self(body.user_id, user)
    hits = memory.search(
        body.query,
        user_id=user.user_id,
        cube_ids=body.cube_ids,
        top_k=body.top_k,
        filters=body.filters,
        include=body.include,
        as_of=body.as_of,
    )
    out = SearchOut(hits=[ExplainedHitOut.of_hit(h, explain=body.explain) for h in hits])
    return Response(
        out.model_dump_json(exclude_unset=True, by_alias=True), media_type="application/json"
    )


@router.post("/context", summary="The memories for a query, packed into a token budget")
def context(body: ContextIn, memory: Memory, user: Caller) -> ContextOut:
    """Text for a prompt (never over ``budget_tokens``) and the items and hits it holds."""
    check_self(body.user_id, user)
    packed = memory.context(
        body.query,
        user_id=user.user_id,
        budget_tokens=body.budget_tokens,
        cube_ids=body.cube_ids,
        session_id=body.session_id,
        filters=body.filters,
        expand_sources=body.expand_sources,
        chain=body.chain,
    )
    return ContextOut.of(packed)


@router.post("/chat", responses=_LLM_ERRORS, summary="Answer from memory with the chat model")
def chat(body: ChatIn, memory: Memory, user: Caller) -> ChatOut:
    """One LLM call with the packed context; the question and answer are stored in ``cube_id``."""
    check_self(body.user_id, user)
    reply = memory.chat(
        body.query,
        user_id=user.user_id,
        cube_id=body.cube_id,
        session_id=body.session_id,
        budget_tokens=body.budget_tokens,
        max_tokens=body.max_tokens,
        use_adapter=body.use_adapter,
    )
    return ChatOut.of(reply)


@router.post(
    "/chat/stream",
    response_class=StreamingResponse,
    responses={
        **_LLM_ERRORS,
        200: {
            "description": _EVENTS,
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
    },
    summary="/chat as server-sent events, piece by piece",
)
def chat_stream(body: ChatIn, memory: Memory, user: Caller) -> StreamingResponse:
    """Everything is checked, and the model's first piece awaited, before the stream starts, so
    those errors are plain JSON errors.

    The exchange is stored once the last piece is sent; a stream the client abandons stores
    nothing.
    """
    check_self(body.user_id, user)
    if body.use_adapter:
        raise ValidationError("use_adapter is not streamed", hint="POST /chat instead")
    pieces = memory.chat_stream(
        body.query,
        user_id=user.user_id,
        cube_id=body.cube_id,
        session_id=body.session_id,
        budget_tokens=body.budget_tokens,
        max_tokens=body.max_tokens,
    )
    first = next(pieces, None)  # a model that fails at once is a plain 502, not a broken stream
    return StreamingResponse(
        _events(itertools.chain([] if first is None else [first], pieces)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _events(pieces: Iterator[str]) -> Iterator[str]:
    """The answer's pieces as server-sent events (see ``_EVENTS``)."""
    try:
        for piece in pieces:
            yield _event("delta", {"text": piece})
    except MemstrataError as exc:
        detail = {"code": exc.code, "message": exc.message}
        yield _event("error", {"error": detail | ({"hint": exc.hint} if exc.hint else {})})
        return
    yield _event("done", {})


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
