"""Who is calling: the bearer API key, checked by ``MemoryOS.authenticate`` on every request.

Routes take ``Caller`` (the ``User`` the key belongs to) and ``Memory`` (the app's ``MemoryOS``).
Identity comes from the key only: a missing, malformed, unknown or revoked key is a 401
``unauthenticated`` before the route runs, and no body field can change who the caller is.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memstrata.memory.system import MemoryOS
from memstrata.model import User

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key: `Authorization: Bearer KEY` (`memstrata serve` prints the first one).",
)


def memory_of(request: Request) -> MemoryOS:
    """The ``MemoryOS`` the app was made with (see ``rest.create_app``)."""
    return cast(MemoryOS, request.app.state.memory)


def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    """The user whose live API key the request carries; ``Unauthenticated`` (401) otherwise."""
    key = None if credentials is None else credentials.credentials
    return memory_of(request).authenticate(key)


async def _memory(request: Request) -> MemoryOS:
    """``memory_of`` as a dependency.  Async on purpose: it does no I/O, and FastAPI runs every
    sync dependency in its thread pool, a hop (about 0.1 ms of CPU) per request for nothing."""
    return memory_of(request)


Memory = Annotated[MemoryOS, Depends(_memory)]
Caller = Annotated[User, Depends(caller)]
