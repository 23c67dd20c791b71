"""The REST endpoints, one module per concept; each route is parse → one ``MemoryOS`` call → render.

Routes are synchronous functions (FastAPI runs them in its thread pool; ``MemoryOS`` is
thread-safe) except where the body is parsed by hand (``POST /memories``).  Every route but
``/health`` takes the ``Caller`` dependency, and passes the caller's id to the core, which checks
the grants.

Every router is made by ``router``, whose routes read JSON bodies as pydantic does (``JSONRoute``):
strictly (RFC 8259 and I-JSON: no ``NaN``, no lone surrogate escape such as ``"\\ud800"``, at
most 200 levels of nesting), so a body that breaks this is a 422 on every route, like any other
malformed JSON, and never reaches the core.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import pydantic_core
from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute

from memstrata.errors import ValidationError
from memstrata.limits import shown
from memstrata.model import User
from memstrata.server.schemas import ErrorBody

_ERROR_STATUSES = {
    400: "Bad request (settings that do not fit, a malformed upload)",
    401: "Missing, unknown or revoked API key",
    403: "The caller lacks the grant or role this needs",
    404: "No such thing (or none the caller may know of)",
    409: "Conflicts with what is stored",
    413: "Request body over the server's limit",
    422: "Invalid input",
    500: "Unexpected server error (the message has an id to look up in the server log)",
}
#: The error responses every authenticated route declares (all with the ``ErrorBody`` shape).
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text} for status, text in _ERROR_STATUSES.items()
}
#: ``ERRORS`` for a route whose own responses are not JSON (FastAPI would document a ``model``
#: response in the route's media type): the JSON content is spelled out.
JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": text,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for status, text in _ERROR_STATUSES.items()
}


def check_self(claimed: str | None, user: User) -> None:
    """Refuse a body's ``user_id`` that is not the caller's: identity comes from the key."""
    if claimed is not None and claimed != user.user_id:
        raise ValidationError(
            f"user_id {shown(claimed)} is not the caller ({user.user_id!r})",
            hint="omit user_id: the API key says who you are",
        )


def user_path(user_id: str, user: User) -> str:
    """A ``{user_id}`` path segment, where ``me`` is the caller."""
    return user.user_id if user_id == "me" else user_id


class _StrictJSONRequest(Request):
    """A request whose ``json()`` is pydantic's parser (see the module docstring); a body it
    refuses raises ``json.JSONDecodeError``, which FastAPI answers with a 422."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = pydantic_core.from_json(body, allow_inf_nan=False)
            except ValueError as exc:
                raise json.JSONDecodeError(str(exc), body.decode("utf-8", "replace"), 0) from exc
        return self._json


class JSONRoute(APIRoute):
    """An ``APIRoute`` whose JSON bodies are read by ``_StrictJSONRequest``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJSONRequest(request.scope, request.receive))

        return strict


def make_router(tag: str, *, errors: bool = True) -> APIRouter:
    """An ``APIRouter`` of ``JSONRoute``s tagged ``tag``, declaring ``ERRORS`` unless told not to."""
    return APIRouter(tags=[tag], route_class=JSONRoute, responses=ERRORS if errors else None)
