"""Who may do what: the checks every core call makes before any work ("Access").

``Access`` answers the questions every ``MemoryOS`` call asks first: who is this user, may they
touch that cube or item, is that time in the past, was that cube embedded with this embedder.
Every part of the core asks through it, so a rule is written once.  Readable-but-missing and
unreadable items are told apart nowhere: both are "not found", so existence does not leak
across cubes.  An id looked up that could not be stored (a lone surrogate, NUL, over
``MAX_ID_CHARS``) is a ``ValidationError`` before any lookup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memstrata.embed import Embedder
from memstrata.embed.base import check_cube_embedder
from memstrata.errors import (
    AdminRequired,
    CubeNotFound,
    ItemNotFound,
    PermissionDenied,
    UserNotFound,
    ValidationError,
)
from memstrata.limits import (
    MAX_CUBE_IDS,
    MAX_ID_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON,
    check_text,
    shown,
)
from memstrata.model import Cube, MemoryItem, User, parse_time, permits, utcnow
from memstrata.store.base import AccessStore

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")


class Access:
    """The grant and identity checks of one store; thread-safe (it only reads)."""

    def __init__(self, store: AccessStore, embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder

    def user(self, user_id: str) -> User:
        """The user; ``UserNotFound`` if there is none with that id."""
        user = self._store.get_user(user_id) if _lookup(user_id, "user_id") else None
        if user is None:
            raise UserNotFound(str(user_id))
        return user

    def admin(self, user_id: str) -> User:
        """The user, once known to be an administrator (``AdminRequired`` otherwise)."""
        user = self.user(user_id)
        if user.role != "admin":
            raise AdminRequired(user_id)
        return user

    def self_or_admin(self, by: str, user_id: str) -> None:
        """Pass when ``by`` acts on itself or is an administrator, and ``user_id`` exists."""
        if by != user_id:
            self.admin(by)
        self.user(user_id)

    def cube(self, user_id: str, cube_id: str, needed: str) -> Cube:
        """The cube, once ``user_id`` is known to hold ``needed`` on it."""
        self.user(user_id)
        cube = self._store.get_cube(cube_id) if _lookup(cube_id, "cube_id") else None
        if cube is None:
            raise CubeNotFound(str(cube_id))
        if not permits(self._store.permission(cube_id, user_id), needed):
            raise PermissionDenied(user_id, cube_id, needed)
        return cube

    def writable_cube(self, user_id: str, cube_id: str) -> Cube:
        """``cube(…, "write")`` for a write that embeds: also checks the cube's embedder."""
        cube = self.cube(user_id, cube_id, "write")
        self.check_embedder(cube)
        return cube

    def readable(self, user_id: str, cube_ids: Sequence[str] | None) -> list[Cube]:
        """``cube_ids`` (each checked ``read``), or every cube ``user_id`` may read."""
        if cube_ids is None:
            self.user(user_id)
            return self._store.list_cubes(user_id)
        if isinstance(cube_ids, str) or not isinstance(cube_ids, (list, tuple)):
            raise ValidationError("cube_ids must be a list of cube ids")
        if len(cube_ids) > MAX_CUBE_IDS:
            raise ValidationError(
                f"{len(cube_ids)} cube ids in one call; at most {MAX_CUBE_IDS} are allowed"
            )
        for cube_id in cube_ids:
            _lookup(cube_id, "cube_id")
        return [self.cube(user_id, c, "read") for c in dict.fromkeys(cube_ids)]

    def item(self, item_id: str, user_id: str, needed: str, cube_id: str | None) -> MemoryItem:
        """The item, once ``user_id`` may ``needed`` it; unreadable items are "not found".

        Read with its cube: ``cube_id`` when given, else the cube the store's id → cube lookup
        (``item_cubes``, the one item query that names no cube) finds for it.
        """
        self.user(user_id)
        item = self._find(item_id, cube_id)
        if item is None or (cube_id is not None and item.cube_id != cube_id):
            raise ItemNotFound(str(item_id), cube_id)
        held = self._store.permission(item.cube_id, user_id)
        if held is None:
            raise ItemNotFound(item_id, cube_id)  # existence must not leak across cubes
        if not permits(held, needed):
            raise PermissionDenied(user_id, item.cube_id, needed)
        return item

    def _find(self, item_id: str, cube_id: str | None) -> MemoryItem | None:
        """The stored item ``item_id`` (of ``cube_id`` when given), or None."""
        if not _lookup(item_id, "item_id"):
            return None
        if cube_id is None:
            cubes = list(self._store.item_cubes([item_id]).values())
        else:
            cubes = [cube_id] if _lookup(cube_id, "cube_id") else []
        found = self._store.get_items([item_id], cubes) if cubes else []
        return found[0] if found else None

    def past_time(self, value: Any, cubes: Sequence[Cube]) -> datetime:
        """``value`` as a time in the past, not before the oldest of ``cubes`` existed."""
        at = parse_time(value, "as_of")
        if at > utcnow():
            raise ValidationError("as_of is in the future", hint="the memory has no future yet")
        if cubes and at < min(c.created_at for c in cubes):
            raise ValidationError(
                "as_of is before the cube existed", hint=f"cubes start at {cubes[0].created_at}"
            )
        return at

    def check_embedder(self, cube: Cube) -> None:
        """``EmbedderMismatch`` when ``cube``'s vectors come from another embedder."""
        check_cube_embedder(cube, self._embedder)

    def check_item_embedder(self, item: MemoryItem) -> None:
        """``check_embedder`` for the cube of an item already checked by ``item``."""
        cube = self._store.get_cube(item.cube_id)
        if cube is None:  # deleted by someone else in the meantime
            raise ItemNotFound(item.id, item.cube_id)
        self.check_embedder(cube)


def check_id(value: object, what: str) -> None:
    """``ValidationError`` unless ``value`` is a valid user, cube or session id."""
    if isinstance(value, str):
        check_text(value, what, MAX_ID_CHARS, line=True)  # the precise reason, when there is one
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ValidationError(
            f"{what} {shown(value)} is not a valid id",
            hint="use 1-128 letters, digits and _ . : @ -, starting with a letter or digit",
        )


def check_int(value: object, what: str, low: int, high: int) -> int:
    """``value`` when it is an integer from ``low`` to ``high`` (not a bool); else
    ``ValidationError`` naming the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{what} must be an integer from {low} to {high}")
    return value


def check_query(query: object) -> str:
    """``query`` when it is a non-empty text of at most ``MAX_QUERY_CHARS`` characters."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query must be a non-empty string")
    return check_text(query, "query", MAX_QUERY_CHARS)


def check_reason(reason: object) -> str | None:
    """``reason`` (kept in the history and the audit) when it is None or a text of at most
    ``MAX_REASON`` characters."""
    return None if reason is None else check_text(reason, "reason", MAX_REASON)


def _lookup(value: object, what: str) -> bool:
    """Whether ``value`` is worth looking up: False for a non-string (not found); a string that
    could not have been stored is a ``ValidationError``."""
    if not isinstance(value, str):
        return False
    check_text(value, what, MAX_ID_CHARS, line=True)
    return True
