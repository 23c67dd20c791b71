"""``Client``'s calls on users, API keys, cubes and grants (``/users…``, ``/mem_cubes…``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstrata.client.transport import Transport, load_as, path_segment
from memstrata.model import ApiKey, Cube, Grant, User


class Principals:
    """Users, keys, cubes and grants over one ``Transport``."""

    def __init__(self, transport: Transport) -> None:
        self._http = transport

    # -- users and keys --------------------------------------------------------------------------

    def create_user(self, user_id: str, name: str | None = None, role: str = "user") -> User:
        """Create a user (admin only); ``ConflictError`` if the id is taken."""
        body = {"user_id": user_id, "name": name, "role": role}
        return load_as(User, self._http.json("POST", "/users", body=body))

    def list_users(self) -> list[User]:
        """Every user (admin only)."""
        return [load_as(User, u) for u in self._http.json("GET", "/users")]

    def me(self) -> User:
        """The user the API key belongs to."""
        return load_as(User, self._http.json("GET", "/users/me"))

    def create_key(self, user_id: str = "me", *, label: str | None = None) -> ApiKey:
        """A new API key for ``user_id`` (the caller, or anyone for an admin).

        ``secret`` is the key itself, shown only here.
        """
        path = f"/users/{path_segment(user_id)}/keys"
        return _key(self._http.json("POST", path, body={"label": label}))

    def list_keys(self, user_id: str = "me") -> list[ApiKey]:
        """``user_id``'s keys, revoked ones with ``revoked_at``, without their secrets."""
        return [_key(k) for k in self._http.json("GET", f"/users/{path_segment(user_id)}/keys")]

    def revoke_key(self, user_id: str, key_id: str) -> None:
        """Revoke one of ``user_id``'s keys (``me``: the caller's); ``NotFoundError`` if none."""
        path = f"/users/{path_segment(user_id)}/keys/{path_segment(key_id)}"
        self._http.request("DELETE", path)

    # -- cubes and grants ------------------------------------------------------------------------

    def create_cube(
        self,
        name: str,
        *,
        cube_id: str | None = None,
        kind: str = "user",
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """Create a cube owned by the caller (tier ``settings``: defaults fill the rest)."""
        body = {"name": name, "cube_id": cube_id, "kind": kind, "settings": settings}
        return load_as(Cube, self._http.json("POST", "/mem_cubes", body=body))

    def list_cubes(self) -> list[Cube]:
        """The cubes the caller may read (owned or shared), oldest first."""
        return [load_as(Cube, c) for c in self._http.json("GET", "/mem_cubes")]

    def get_cube(self, cube_id: str) -> Cube:
        """One cube (needs read)."""
        return load_as(Cube, self._http.json("GET", _cube_path(cube_id)))

    def delete_cube(self, cube_id: str) -> int:
        """Delete a cube and all its memory (needs admin on it); returns the item count."""
        return int(self._http.json("DELETE", _cube_path(cube_id))["deleted_items"])

    def grant(self, cube_id: str, user_id: str, permission: str) -> Grant:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube (needs admin on it)."""
        body = {"user_id": user_id, "permission": permission}
        return load_as(Grant, self._http.json("POST", _cube_path(cube_id) + "/share", body=body))

    def share(self, cube_id: str, user_id: str, permission: str = "read") -> Grant:
        """``grant`` under MemOS's name."""
        return self.grant(cube_id, user_id, permission)

    def revoke(self, cube_id: str, user_id: str) -> None:
        """Take away ``user_id``'s grant (needs admin); ``NotFoundError`` if they hold none."""
        self._http.request("DELETE", f"{_cube_path(cube_id)}/share/{path_segment(user_id)}")

    def grants(self, cube_id: str) -> list[Grant]:
        """Who holds what on a cube, the owner included, oldest first (needs admin)."""
        return [load_as(Grant, g) for g in self._http.json("GET", _cube_path(cube_id) + "/grants")]


def _cube_path(cube_id: str) -> str:
    return f"/mem_cubes/{path_segment(cube_id)}"


def _key(data: Any) -> ApiKey:
    """A key record; a new key's ``key`` is its ``secret`` (a listed key has none)."""
    record = dict(data) if isinstance(data, dict) else {}
    secret = record.pop("key", None)
    return load_as(ApiKey, record | {"secret": secret})
