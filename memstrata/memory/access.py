"""What every part of ``MemoryOS`` stands on: its components and the checks before any work.

``MemoryCore`` holds the store, the embedder, the settings, the chat model and the background
work, and answers the questions every call asks first: who is this user, may they touch that
cube or item, is that time in the past.  ``MemoryOS`` (``system.py``) is this core with the
users and cubes of ``principals.py``, the lifecycle of ``lifecycle/governance.py``, and the
memory itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from memstrata.config import Settings
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
from memstrata.llm import LLM, Completion
from memstrata.model import Cube, MemoryItem, User, parse_time, permits, utcnow
from memstrata.scheduler import Scheduler
from memstrata.store.base import Store
from memstrata.store.sqlite import usage
from memstrata.tiers.tasks import TierTasks

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
MAX_TOP_K = 1000


class MemoryCore:
    """The components of a ``MemoryOS`` and the checks its calls make (see the module docs)."""

    store: Store
    embedder: Embedder
    settings: Settings
    #: the chat model (chat, and the ``llm`` reader when chosen); None without one
    llm: LLM | None
    scheduler: Scheduler
    tiers: TierTasks
    _record_usage: Callable[[str, Completion], None] | None
    _llm_usage: Callable[[str], usage.LLMUsage] | None

    def get_user(self, user_id: str) -> User:
        user = self.store.get_user(user_id) if isinstance(user_id, str) else None
        if user is None:
            raise UserNotFound(str(user_id))
        return user

    def _require(self, user_id: str, cube_id: str, needed: str) -> Cube:
        """The cube, once ``user_id`` is known to hold ``needed`` on it."""
        self.get_user(user_id)
        cube = self.store.get_cube(cube_id) if isinstance(cube_id, str) else None
        if cube is None:
            raise CubeNotFound(str(cube_id))
        if not permits(self.store.permission(cube_id, user_id), needed):
            raise PermissionDenied(user_id, cube_id, needed)
        return cube

    def _readable(self, user_id: str, cube_ids: Sequence[str] | None) -> list[Cube]:
        if cube_ids is None:
            self.get_user(user_id)
            return self.store.list_cubes(user_id)
        if isinstance(cube_ids, str) or not isinstance(cube_ids, (list, tuple)):
            raise ValidationError("cube_ids must be a list of cube ids")
        return [self._require(user_id, c, "read") for c in dict.fromkeys(cube_ids)]

    def _past_time(self, value: Any, cubes: Sequence[Cube]) -> datetime:
        """``value`` as a time in the past, not before the oldest of ``cubes`` existed."""
        at = parse_time(value, "as_of")
        if at > utcnow():
            raise ValidationError("as_of is in the future", hint="the memory has no future yet")
        if cubes and at < min(c.created_at for c in cubes):
            raise ValidationError(
                "as_of is before the cube existed", hint=f"cubes start at {cubes[0].created_at}"
            )
        return at

    def _require_admin(self, user_id: str) -> User:
        user = self.get_user(user_id)
        if user.role != "admin":
            raise AdminRequired(user_id)
        return user

    def _require_self_or_admin(self, by: str, user_id: str) -> None:
        if by != user_id:
            self._require_admin(by)
        self.get_user(user_id)

    def _item(self, item_id: str, user_id: str, needed: str, cube_id: str | None) -> MemoryItem:
        """The item, once ``user_id`` may ``needed`` it; unreadable items are "not found"."""
        self.get_user(user_id)
        found = self.store.get_items([item_id]) if isinstance(item_id, str) else []
        item = found[0] if found else None
        if item is None or (cube_id is not None and item.cube_id != cube_id):
            raise ItemNotFound(str(item_id), cube_id)
        held = self.store.permission(item.cube_id, user_id)
        if held is None:
            raise ItemNotFound(item_id, cube_id)  # existence must not leak across cubes
        if not permits(held, needed):
            raise PermissionDenied(user_id, item.cube_id, needed)
        return item

    def _check_embedder(self, cube: Cube) -> None:
        check_cube_embedder(cube, self.embedder)


def check_id(value: object, what: str) -> None:
    """``ValidationError`` unless ``value`` is a valid user, cube or session id."""
    if not isinstance(value, str) or not _ID.match(value):
        raise ValidationError(
            f"{what} {value!r} is not a valid id",
            hint="use 1-128 letters, digits and _ . : @ -, starting with a letter or digit",
        )
