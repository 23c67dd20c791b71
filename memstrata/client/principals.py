"""``Client``'s calls on users, API keys, cubes and grants (``/users…``, ``/mem_cubes…``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstrata.client.transport import Exchange, Requests, load_as, path_segment
from memstrata.model import ApiKey, Cube, Grant, User


class Principals:
    """Users, keys, cubes and grants as exchanges (``client.transport``)."""

    def __init__(self) -> None:
        self._http = Requests()

    # -- users and keys --------------------------------------------------------------------------

    def create_user(
        self, user_id: str, name: str | None = None, role: str = "user"
    ) -> Exchange[User]:
        """Create a user (admin only); ``ConflictError`` if the id is taken."""
        body = {"user_id": user_id, "name": name, "role": role}
        return load_as(User, (yield from self._http.json("POST", "/users", body=body)))

    def list_users(self) -> Exchange[list[User]]:
        """Every user (admin only)."""
        return [load_as(User, u) for u in (yield from self._http.json("GET", "/users"))]

    def me(self) -> Exchange[User]:
        """The user the API key belongs to."""
        return load_as(User, (yield from self._http.json("GET", "/users/me")))

    def create_key(self, user_id: str = "me", *, label: str | None = None) -> Exchange[ApiKey]:
        """A new API key for ``user_id`` (the caller, or anyone for an admin).

        ``secret`` is the key itself, shown only here.
        """
        path = f"/users/{path_segment(user_id)}/keys"
        return _key((yield from self._http.json("POST", path, body={"label": label})))

    def list_keys(self, user_id: str = "me") -> Exchange[list[ApiKey]]:
        """``user_id``'s keys, revoked ones with ``revoked_at``, without their secrets."""
        return [
            _key(k)
            for k in (yield from self._http.json("GET", f"/users/{path_segment(user_id)}/keys"))
        ]

    def revoke_key(self, user_id: str, key_id: str) -> Exchange[None]:
        """Revoke one of ``user_id``'s keys (``me``: the caller's); ``NotFoundError`` if none."""
        path = f"/users/{path_segment(user_id)}/keys/{path_segment(key_id)}"
        yield from self._http.send("DELETE", path)

    # -- cubes and grants ------------------------------------------------------------------------

    def create_cube(
        self,
        name: str,
        *,
        cube_id: str | None = None,
        kind: str = "user",
        settings: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
    ) -> Exchange[Cube]:
        """Create a cube owned by the caller (tier ``settings``: defaults fill the rest).

        A taken ``cube_id`` is ``AlreadyExists``, unless ``exist_ok``: then the caller's own cube
        of that id is returned (a cube of another owner, even one shared with the caller, is
        still ``AlreadyExists``), as ``MemoryOS.create_cube`` does.  With ``exist_ok`` and no
        ``cube_id``, the caller's oldest cube called ``name`` is returned when there is one; so
        a script run twice gets the same cube, not a second one of that name.
        """
        if exist_ok:
            found = yield from self._owned(name, cube_id)
            if found is not None:
                return found
        body = {"name": name, "cube_id": cube_id, "kind": kind, "settings": settings}
        return load_as(Cube, (yield from self._http.json("POST", "/mem_cubes", body=body)))

    def _owned(self, name: str, cube_id: str | None) -> Exchange[Cube | None]:
        """The caller's cube ``cube_id`` (or, without one, its oldest called ``name``), or None.

        Two reads (who the caller is, the cubes it may read, oldest first) and no write: the
        server decides nothing new, and a cube the caller cannot read is not found here, so the
        create that follows answers for it exactly as it would without ``exist_ok``.
        """
        caller = yield from self.me()
        for cube in (yield from self.list_cubes()):
            if cube.owner != caller.user_id:
                continue
            if cube.cube_id == cube_id if cube_id is not None else cube.name == name:
                return cube
        return None

    def list_cubes(self) -> Exchange[list[Cube]]:
        """The cubes the caller may read (owned or shared), oldest first."""
        return [load_as(Cube, c) for c in (yield from self._http.json("GET", "/mem_cubes"))]

    def get_cube(self, cube_id: str) -> Exchange[Cube]:
        """One cube (needs read)."""
        return load_as(Cube, (yield from self._http.json("GET", _cube_path(cube_id))))

    def delete_cube(self, cube_id: str) -> Exchange[int]:
        """Delete a cube and all its memory (needs admin on it); returns the item count."""
        return int((yield from self._http.json("DELETE", _cube_path(cube_id)))["deleted_items"])

    def grant(self, cube_id: str, user_id: str, permission: str) -> Exchange[Grant]:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube (needs admin on it)."""
        body = {"user_id": user_id, "permission": permission}
        return load_as(
            Grant, (yield from self._http.json("POST", _cube_path(cube_id) + "/share", body=body))
        )

    def share(self, cube_id: str, user_id: str, permission: str = "read") -> Exchange[Grant]:
        """``grant`` under MemOS's name."""
        return (yield from self.grant(cube_id, user_id, permission))

    def revoke(self, cube_id: str, user_id: str) -> Exchange[None]:
        """Take away ``user_id``'s grant (needs admin); ``NotFoundError`` if they hold none."""
        yield from self._http.send("DELETE", f"{_cube_path(cube_id)}/share/{path_segment(user_id)}")

    def grants(self, cube_id: str) -> Exchange[list[Grant]]:
        """Who holds what on a cube, the owner included, oldest first (needs admin)."""
        return [
            load_as(Grant, g)
            for g in (yield from self._http.json("GET", _cube_path(cube_id) + "/grants"))
        ]


def _cube_path(cube_id: str) -> str:
    return f"/mem_cubes/{path_segment(cube_id)}"


def _key(data: Any) -> ApiKey:
    """A key record; a new key's ``key`` is its ``secret`` (a listed key has none)."""
    record = dict(data) if isinstance(data, dict) else {}
    secret = record.pop("key", None)
    return load_as(ApiKey, record | {"secret": secret})
