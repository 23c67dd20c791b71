"""Users, API keys, cubes and grants: who may do what (DESIGN §2), as ``MemoryOS`` methods.

Identity is a user; a surface learns it from an API key (``authenticate``).  Keys are random and
kept as hashes (``memstrata.keys``).  Cubes are owned (the owner holds ``admin``) and shared by
grants.  Administrators (role ``admin``) create users, manage anyone's keys and tune search at
run time (``configure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memstrata import keys
from memstrata.config import Settings
from memstrata.embed import fingerprint
from memstrata.errors import ConfigurationError, NotFoundError, Unauthenticated, ValidationError
from memstrata.filters import Filters
from memstrata.memory.access import MAX_TOP_K, MemoryCore, check_id
from memstrata.model import (
    CUBE_KINDS,
    ITEM_TYPES,
    PERMISSIONS,
    ROLES,
    TIERS,
    ApiKey,
    Cube,
    Grant,
    User,
    new_id,
)
from memstrata.tiers.settings import TierSettings

#: The values ``configure`` accepts for each runtime setting.
_RUNTIME_RANGES: dict[str, tuple[float, float]] = {
    "rrf_k": (1, 10_000),
    "search_candidates": (1, 10_000),
    "keyword_max_postings": (1, 10_000_000),
    "keyword_weight": (0.0, 100.0),
    "dense_weight": (0.0, 100.0),
}


class Principals(MemoryCore):
    """``MemoryOS``'s calls for users, keys, cubes, grants, statistics and runtime settings."""

    def create_user(
        self, user_id: str, name: str | None = None, role: str = "user", *, by: str | None = None
    ) -> User:
        """Create a user; ``AlreadyExists`` if the id is taken.

        ``by`` (surfaces pass the caller) must be an admin; in-process callers may omit it.
        """
        if by is not None:
            self._require_admin(by)
        check_id(user_id, "user_id")
        if role not in ROLES:
            raise ValidationError(f"role {role!r} is not one of {', '.join(ROLES)}")
        if name is not None and not isinstance(name, str):
            raise ValidationError("name must be a string")
        user = User(user_id=user_id, name=name, role=role)  # type: ignore[arg-type]
        self.store.put_user(user)
        return user

    def list_users(self, *, by: str | None = None) -> list[User]:
        """Every user; ``by`` (when given) must be an admin."""
        if by is not None:
            self._require_admin(by)
        return self.store.list_users()

    def create_key(self, user_id: str, *, by: str, label: str | None = None) -> ApiKey:
        """A new API key for ``user_id`` (``by`` is that user or an admin).

        The returned ``ApiKey.secret`` is the key itself: it is not stored and cannot be shown
        again.
        """
        self._require_self_or_admin(by, user_id)
        if label is not None and (not isinstance(label, str) or len(label) > 200):
            raise ValidationError("label must be a string of at most 200 characters")
        secret = keys.new_key()
        key = ApiKey(key_id=new_id(), user_id=user_id, label=label, secret=secret)
        self.store.put_key(key, keys.key_hash(secret))
        return key

    def list_keys(self, user_id: str, *, by: str) -> list[ApiKey]:
        """``user_id``'s keys (revoked ones too, with ``revoked_at``), without secrets."""
        self._require_self_or_admin(by, user_id)
        return self.store.list_keys(user_id)

    def revoke_key(self, user_id: str, key_id: str, *, by: str) -> None:
        """Revoke one of ``user_id``'s keys; ``KeyNotFound`` if it has no such live key."""
        self._require_self_or_admin(by, user_id)
        if not isinstance(key_id, str) or not self.store.revoke_key(user_id, key_id, by):
            raise NotFoundError(
                f"user {user_id!r} has no active key {key_id!r}", hint="list the user's keys"
            )

    def authenticate(self, key: str | None) -> User:
        """The user a live API key belongs to; ``Unauthenticated`` otherwise."""
        if not key or not isinstance(key, str):
            raise Unauthenticated(
                "an API key is required", hint="send the header 'Authorization: Bearer KEY'"
            )
        user_id = self.store.key_user(keys.key_hash(key))
        if user_id is None:
            raise Unauthenticated("the API key is unknown or revoked")
        return self.get_user(user_id)

    def bootstrap_admin(self, key: str | None = None, user_id: str = "admin") -> str | None:
        """On a database with no users, create admin ``user_id`` and return its API key.

        ``key`` (e.g. from ``MEMSTRATA_ADMIN_KEY``) is used as the key when given, else one is
        made.  Returns None, changing nothing, when users already exist; a given ``key`` is then
        still accepted if it is not yet stored (so a fixed admin key survives a restart).
        """
        if key is not None and len(key) < 16:
            raise ValidationError("the admin key must be at least 16 characters")
        if self.store.list_users():
            if key is not None and self.store.key_user(keys.key_hash(key)) is None:
                admin = next((u for u in self.store.list_users() if u.role == "admin"), None)
                if admin is not None:
                    record = ApiKey(key_id=new_id(), user_id=admin.user_id, label="admin key")
                    self.store.put_key(record, keys.key_hash(key))
            return None
        self.create_user(user_id, name="Administrator", role="admin")
        secret = key or keys.new_key()
        record = ApiKey(key_id=new_id(), user_id=user_id, label="bootstrap")
        self.store.put_key(record, keys.key_hash(secret))
        return secret

    def create_cube(
        self,
        name: str,
        *,
        owner: str,
        cube_id: str | None = None,
        kind: str = "user",
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """Create a cube owned (with ``admin``) by ``owner``; its vectors use this embedder.

        ``settings`` are the tier settings of ``memstrata.tiers.settings.TierSettings`` (the
        defaults fill what is missing); an unknown key or a value out of range is a
        ``ValidationError`` naming the allowed range.
        """
        self.get_user(owner)
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("cube name must be a non-empty string")
        if cube_id is not None:
            check_id(cube_id, "cube_id")
        if kind not in CUBE_KINDS:
            raise ValidationError(f"cube kind {kind!r} is not one of {', '.join(CUBE_KINDS)}")
        tiers = TierSettings.parse(settings)
        cube = Cube(
            cube_id=cube_id or new_id(),
            name=name,
            owner=owner,
            kind=kind,  # type: ignore[arg-type]
            settings=tiers.as_dict(),
            embedder=fingerprint(self.embedder),
        )
        self.store.put_cube(cube)
        return cube

    def get_cube(self, cube_id: str, *, user_id: str) -> Cube:
        return self._require(user_id, cube_id, "read")

    def delete_cube(self, cube_id: str, *, user_id: str) -> int:
        """Delete a cube and all its memory for good (needs ``admin``); returns the item count.

        Items, versions, vectors, the full-text index, tasks and grants go; the cube's audit
        events stay as tombstones with their payloads blanked.
        """
        self._require(user_id, cube_id, "admin")
        return self.store.delete_cube(cube_id, user_id)

    def list_cubes(self, *, user_id: str) -> list[Cube]:
        """The cubes ``user_id`` may read (owned or shared), oldest first."""
        return self._readable(user_id, None)

    def grant(self, cube_id: str, user_id: str, permission: str, *, by: str) -> Grant:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube; ``by`` needs admin."""
        if permission not in PERMISSIONS:
            raise ValidationError(
                f"permission {permission!r} is not one of {', '.join(PERMISSIONS)}"
            )
        cube = self._require(by, cube_id, "admin")
        self.get_user(user_id)
        if user_id == cube.owner and permission != "admin":
            raise ValidationError("the owner of a cube always keeps admin")
        grant = Grant(cube_id, user_id, permission, by)  # type: ignore[arg-type]
        self.store.put_grant(grant)
        return grant

    def share(self, cube_id: str, user_id: str, permission: str = "read", *, by: str) -> Grant:
        """``grant`` under MemOS's name: give ``user_id`` ``permission`` on a cube."""
        return self.grant(cube_id, user_id, permission, by=by)

    def revoke(self, cube_id: str, user_id: str, *, by: str) -> None:
        """Take away ``user_id``'s grant on a cube (``by`` needs admin); the owner keeps admin."""
        cube = self._require(by, cube_id, "admin")
        self.get_user(user_id)
        if user_id == cube.owner:
            raise ValidationError("the owner of a cube always keeps admin")
        if not self.store.delete_grant(cube_id, user_id, by):
            raise NotFoundError(f"user {user_id!r} holds no grant on cube {cube_id!r}")

    def grants(self, cube_id: str, *, by: str) -> list[Grant]:
        """Who holds what on a cube (``by`` needs admin), oldest grant first."""
        self._require(by, cube_id, "admin")
        return self.store.list_grants(cube_id)

    def stats(self, *, user_id: str, cube_id: str | None = None) -> dict[str, Any]:
        """Per readable cube (or just ``cube_id``): items by tier and type, tasks, LLM usage."""
        result: dict[str, Any] = {}
        for cube in self._readable(user_id, None if cube_id is None else [cube_id]):
            live = Filters()
            counts = {
                f"{tier}/{kind}": n
                for tier in TIERS
                for kind in ITEM_TYPES
                if (
                    n := self.store.count_items(
                        cube.cube_id, replace(live, tiers=(tier,), types=(kind,))
                    )
                )
            }
            pending = self.scheduler.queue.tasks(
                cube_id=cube.cube_id, status="pending", limit=MAX_TOP_K
            )
            result[cube.cube_id] = {
                "name": cube.name,
                "items": counts,
                "pending_tasks": len(pending),
                "llm_usage": dict(self._llm_usage(cube.cube_id)) if self._llm_usage else {},
            }
        return result

    #: Settings an admin may change while running (``configure``): search tuning only.
    RUNTIME_SETTINGS = tuple(_RUNTIME_RANGES)

    def configure(self, *, by: str, **changes: Any) -> Settings:
        """Change runtime settings (``RUNTIME_SETTINGS``) for this process; ``by`` is an admin."""
        self._require_admin(by)
        unknown = sorted(set(changes) - set(self.RUNTIME_SETTINGS))
        if unknown:
            raise ValidationError(
                f"setting(s) {', '.join(unknown)} cannot be changed at run time",
                hint=f"runtime settings: {', '.join(self.RUNTIME_SETTINGS)}",
            )
        try:
            updated = Settings.from_mapping({**vars(self.settings), **changes})
        except ConfigurationError as exc:
            raise ValidationError(exc.message, hint=exc.hint) from exc
        for name, (low, high) in _RUNTIME_RANGES.items():
            value = getattr(updated, name)
            if not low <= value <= high:  # also refuses NaN
                raise ValidationError(f"{name} must be from {low} to {high}")
        self.settings = updated
        return updated
