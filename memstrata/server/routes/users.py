"""Users, their API keys, their profile and preferences: ``/users…``."""

from __future__ import annotations

from fastapi import Response

from memstrata.model import Preference, ProfileAttribute, User
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import make_router, user_path
from memstrata.server.schemas import KeyIn, KeyOut, NewKey, UserIn

router = make_router("users")


@router.get("/users", summary="List every user (admin only)")
def list_users(memory: Memory, user: Caller) -> list[User]:
    return memory.list_users(by=user.user_id)


@router.post("/users", status_code=201, summary="Create a user (admin only)")
def create_user(body: UserIn, memory: Memory, user: Caller) -> User:
    return memory.create_user(body.user_id, name=body.name, role=body.role, by=user.user_id)


@router.get("/users/me", summary="The caller")
def me(user: Caller) -> User:
    return user


@router.get("/users/me/profile", summary="The caller's current profile attributes")
def profile(memory: Memory, user: Caller, cube_id: str | None = None) -> list[ProfileAttribute]:
    """Profile attributes from ``cube_id`` (default: every cube the caller may read)."""
    return memory.get_profile(user_id=user.user_id, cube_id=cube_id)


@router.get("/users/me/preferences", summary="The caller's current preferences")
def preferences(memory: Memory, user: Caller, cube_id: str | None = None) -> list[Preference]:
    """Preferences (likes, dislikes) from ``cube_id`` (default: every cube the caller may read),
    each with the turns that show it."""
    return memory.get_preferences(user_id=user.user_id, cube_id=cube_id)


@router.post(
    "/users/{user_id}/keys", status_code=201, summary="Create an API key (shown only here)"
)
def create_key(user_id: str, memory: Memory, user: Caller, body: KeyIn | None = None) -> NewKey:
    """A new key for ``user_id`` (``me``: the caller); only that user or an admin may."""
    key = memory.create_key(
        user_path(user_id, user), by=user.user_id, label=None if body is None else body.label
    )
    return NewKey.of(key)


@router.get("/users/{user_id}/keys", summary="List a user's API keys (without the keys)")
def list_keys(user_id: str, memory: Memory, user: Caller) -> list[KeyOut]:
    return [KeyOut.of(k) for k in memory.list_keys(user_path(user_id, user), by=user.user_id)]


@router.delete("/users/{user_id}/keys/{key_id}", status_code=204, summary="Revoke an API key")
def revoke_key(user_id: str, key_id: str, memory: Memory, user: Caller) -> Response:
    memory.revoke_key(user_path(user_id, user), key_id, by=user.user_id)
    return Response(status_code=204)
