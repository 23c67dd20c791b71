"""Who is calling an MCP tool, and which cube is theirs (see the package docs)."""

from __future__ import annotations

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from memstrata.errors import Unauthenticated
from memstrata.memory.system import MemoryOS


class Caller:
    """Resolves the acting user and their cube for the current request.

    ``user`` is fixed (stdio) or, when None, read from the request's bearer key (HTTP); ``cube``
    is fixed, or when None the user's ``MemoryOS.default_cube``.  Thread-safe.
    """

    def __init__(self, memory: MemoryOS, user: str | None = None, cube: str | None = None) -> None:
        self._memory = memory
        self._user = user
        self._cube = cube

    def user(self) -> str:
        """The acting user; ``Unauthenticated`` over HTTP without a verified key."""
        if self._user is not None:
            return self._user
        token = get_access_token()
        if token is None:
            raise Unauthenticated("an API key is required", hint="send 'Authorization: Bearer KEY'")
        return token.client_id

    def scope(self, cube_id: str | None = None) -> tuple[str, str]:
        """``(user, cube)``: ``cube_id`` when given, else the caller's own cube."""
        user = self.user()
        if cube_id is not None:
            return user, cube_id
        if self._cube is not None:
            return user, self._cube
        return user, self._memory.default_cube(user).cube_id


def fixed_caller(memory: MemoryOS, user_id: str, cube_id: str | None = None) -> Caller:
    """The stdio caller: ``user_id`` and ``cube_id`` (default: their default cube), created when
    absent (``MemoryOS.attach``); ``PermissionDenied`` for a cube the user may not read."""
    return Caller(memory, user_id, memory.attach(user_id, cube_id).cube_id)


class KeyVerifier:
    """The SDK's ``TokenVerifier`` for memstrata API keys (``MemoryOS.authenticate``)."""

    def __init__(self, memory: MemoryOS) -> None:
        self._memory = memory

    async def verify_token(self, token: str) -> AccessToken | None:
        """The key's user as ``client_id`` and ``subject``; None for an unknown or revoked key."""
        try:
            user = await anyio.to_thread.run_sync(self._memory.authenticate, token)
        except Unauthenticated:
            return None
        return AccessToken(token=token, client_id=user.user_id, subject=user.user_id, scopes=[])
