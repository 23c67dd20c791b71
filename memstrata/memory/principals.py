"""Users, API keys, cubes and grants: who may do what; ``MemoryOS`` delegates here.

Identity is a user; a surface learns it from an API key (``authenticate``).  Keys are random and
kept as hashes (``memstrata.keys``).  Cubes are owned (the owner holds ``admin``) and shared by
grants.  Administrators (role ``admin``) create users, manage anyone's keys and tune search at
run time (``configure``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import replace
from typing import Any

from memstrata import keys
from memstrata.config import RUNTIME_RANGES, Settings
from memstrata.embed import fingerprint
from memstrata.errors import (
    AlreadyExists,
    ConfigurationError,
    CubeNotFound,
    NotFoundError,
    StorageError,
    Unauthenticated,
    ValidationError,
)
from memstrata.filters import Filters
from memstrata.limits import (
    MAX_DISPLAY_NAME,
    MAX_ID_CHARS,
    MAX_KEY_LABEL,
    MAX_TOP_K,
    check_text,
    shown,
)
from memstrata.memory.access import check_id, check_int
from memstrata.memory.components import Components
from memstrata.model import (
    CUBE_KINDS,
    ITEM_TYPES,
    PERMISSIONS,
    ROLES,
    TIERS,
    ApiKey,
    Cube,
    Grant,
    LLMUsage,
    User,
    new_id,
)
from memstrata.tiers.settings import TierSettings


class Principals:
    """``MemoryOS``'s calls for users, keys, cubes, grants, statistics and runtime settings."""

    #: Settings an admin may change while running (``configure``): search tuning only.
    RUNTIME_SETTINGS = tuple(RUNTIME_RANGES)

    def __init__(self, parts: Components) -> None:
        self._parts = parts
        self._store = parts.store
        self._access = parts.access
        self._default_cube_lock = threading.Lock()

    def create_user(
        self,
        user_id: str,
        name: str | None = None,
        role: str = "user",
        *,
        by: str | None = None,
        exist_ok: bool = False,
    ) -> User:
        """Create a user; ``AlreadyExists`` if the id is taken, unless ``exist_ok``: then the
        stored user is returned as it is (a script run twice gets the same user; its name and
        role are not changed).

        ``by`` (surfaces pass the caller) must be an admin; in-process callers may omit it.
        """
        if by is not None:
            self._access.admin(by)
        check_id(user_id, "user_id")
        if role not in ROLES:
            raise ValidationError(f"role {shown(role)} is not one of {', '.join(ROLES)}")
        if name is not None:
            check_text(name, "name", MAX_DISPLAY_NAME, line=True)
        user = User(user_id=user_id, name=name, role=role)  # type: ignore[arg-type]
        try:
            self._store.put_user(user)
        except AlreadyExists:
            if not exist_ok:
                raise
            return self._access.user(user_id)
        return user

    def list_users(self, *, by: str | None = None) -> list[User]:
        """Every user; ``by`` (when given) must be an admin."""
        if by is not None:
            self._access.admin(by)
        return self._store.list_users()

    def get_user(self, user_id: str) -> User:
        """The user; ``UserNotFound`` if there is none with that id."""
        return self._access.user(user_id)

    def create_key(self, user_id: str, *, by: str, label: str | None = None) -> ApiKey:
        """A new API key for ``user_id`` (``by`` is that user or an admin).

        The returned ``ApiKey.secret`` is the key itself: it is not stored and cannot be shown
        again.
        """
        self._access.self_or_admin(by, user_id)
        if label is not None:
            check_text(label, "label", MAX_KEY_LABEL, line=True)
        secret = keys.new_key()
        key = ApiKey(key_id=new_id(), user_id=user_id, label=label, secret=secret)
        self._store.put_key(key, keys.key_hash(secret))
        return key

    def list_keys(self, user_id: str, *, by: str) -> list[ApiKey]:
        """``user_id``'s keys (revoked ones too, with ``revoked_at``), without secrets."""
        self._access.self_or_admin(by, user_id)
        return self._store.list_keys(user_id)

    def revoke_key(self, user_id: str, key_id: str, *, by: str) -> None:
        """Revoke one of ``user_id``'s keys; ``KeyNotFound`` if it has no such live key."""
        self._access.self_or_admin(by, user_id)
        if isinstance(key_id, str):
            check_text(key_id, "key_id", MAX_ID_CHARS, line=True)
        if not isinstance(key_id, str) or not self._store.revoke_key(user_id, key_id, by):
            raise NotFoundError(
                f"user {user_id!r} has no active key {key_id!r}", hint="list the user's keys"
            )

    def authenticate(self, key: str | None) -> User:
        """The user a live API key belongs to; ``Unauthenticated`` otherwise."""
        if not key or not isinstance(key, str):
            raise Unauthenticated(
                "an API key is required", hint="send the header 'Authorization: Bearer KEY'"
            )
        try:
            user_id = self._store.key_user(keys.key_hash(key))
        except UnicodeEncodeError:  # a lone surrogate: no key has one
            user_id = None
        if user_id is None:
            raise Unauthenticated("the API key is unknown or revoked")
        return self._access.user(user_id)

    def bootstrap_admin(self, key: str | None = None, user_id: str = "admin") -> str | None:
        """On a database with no users, create admin ``user_id`` and return its API key.

        ``key`` (e.g. from ``MEMSTRATA_ADMIN_KEY``) is used as the key when given, else one is
        made.  Returns None, changing nothing, when users already exist; a given ``key`` is then
        still accepted if it is not yet stored (so a fixed admin key survives a restart).
        """
        if key is not None and len(key) < 16:
            raise ValidationError("the admin key must be at least 16 characters")
        if not self._store.list_users():
            try:
                self.create_user(user_id, name="Administrator", role="admin")
            except AlreadyExists:
                pass  # another process bootstrapped the same database at the same moment
            else:
                secret = key or keys.new_key()
                record = ApiKey(key_id=new_id(), user_id=user_id, label="bootstrap")
                self._store.put_key(record, keys.key_hash(secret))
                return secret
        if key is not None and self._store.key_user(keys.key_hash(key)) is None:
            admin = next((u for u in self._store.list_users() if u.role == "admin"), None)
            if admin is not None:
                record = ApiKey(key_id=new_id(), user_id=admin.user_id, label="admin key")
                try:
                    self._store.put_key(record, keys.key_hash(key))
                except StorageError:
                    # Stored meanwhile by another process starting with the same key.
                    if self._store.key_user(keys.key_hash(key)) is None:
                        raise
        return None

    def create_cube(
        self,
        name: str,
        *,
        owner: str,
        cube_id: str | None = None,
        kind: str = "user",
        settings: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
    ) -> Cube:
        """Create a cube owned (with ``admin``) by ``owner``; its vectors use this embedder.

        ``settings`` are the tier settings of ``memstrata.tiers.settings.TierSettings`` (the
        defaults fill what is missing); an unknown key or a value out of range is a
        ``ValidationError`` naming the allowed range.  A taken ``cube_id`` is ``AlreadyExists``,
        unless ``exist_ok``: then the cube of that id is returned when ``owner`` owns it (else
        ``AlreadyExists`` still: another's cube is not handed out).  With ``exist_ok`` and no
        ``cube_id``, the oldest cube of that name ``owner`` owns is returned when there is one.
        """
        self._access.user(owner)
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("cube name must be a non-empty string")
        check_text(name, "cube name", MAX_DISPLAY_NAME, line=True)
        if cube_id is not None:
            check_id(cube_id, "cube_id")
        if exist_ok:
            found = self._owned(owner, name, cube_id)
            if found is not None:
                return found
        if kind not in CUBE_KINDS:
            raise ValidationError(f"cube kind {shown(kind)} is not one of {', '.join(CUBE_KINDS)}")
        tiers = TierSettings.parse(settings)
        cube = Cube(
            cube_id=cube_id or new_id(),
            name=name,
            owner=owner,
            kind=kind,  # type: ignore[arg-type]
            settings=tiers.as_dict(),
            embedder=fingerprint(self._parts.embedder),
        )
        self._store.put_cube(cube)
        return cube

    def _owned(self, owner: str, name: str, cube_id: str | None) -> Cube | None:
        """The cube ``cube_id`` when ``owner`` owns it (``AlreadyExists`` when another does),
        or without an id the oldest cube named ``name`` that ``owner`` owns; None if none."""
        if cube_id is not None:
            cube = self._store.get_cube(cube_id)
            if cube is not None and cube.owner != owner:
                raise AlreadyExists("cube", cube_id)
            return cube
        named = [c for c in self._store.list_cubes(owner) if c.owner == owner and c.name == name]
        return named[0] if named else None

    def get_cube(self, cube_id: str, *, user_id: str) -> Cube:
        """The cube, when ``user_id`` may read it."""
        return self._access.cube(user_id, cube_id, "read")

    def default_cube(self, user_id: str) -> Cube:
        """The oldest cube ``user_id`` owns; a new one named after them if they own none.

        Concurrent first calls in one process make one cube, not several.
        """
        with self._default_cube_lock:
            owned = [c for c in self.list_cubes(user_id=user_id) if c.owner == user_id]
            return owned[0] if owned else self.create_cube(user_id, owner=user_id)

    def attach(
        self,
        user_id: str,
        cube_id: str | None = None,
        *,
        name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """The user an agent acts as, and the cube it works in, created when absent.

        The user ``user_id`` is created if missing; the cube is ``cube_id`` (created if missing,
        owned by ``user_id``, named ``name`` or else its id, with tier ``settings``) or the user's
        ``default_cube``.  An existing cube is returned as it is; one that the user may not read
        raises ``PermissionDenied``.
        """
        with suppress(AlreadyExists):  # another process may create it meanwhile
            self.create_user(user_id)
        if cube_id is None:
            return self.default_cube(user_id)
        try:
            return self.get_cube(cube_id, user_id=user_id)
        except CubeNotFound:
            with suppress(AlreadyExists):  # another process may create it meanwhile
                self.create_cube(name or cube_id, owner=user_id, cube_id=cube_id, settings=settings)
            return self.get_cube(cube_id, user_id=user_id)

    def delete_cube(self, cube_id: str, *, user_id: str) -> int:
        """Delete a cube and all its memory for good (needs ``admin``); returns the item count.

        Items, versions, vectors, the full-text index, tasks and grants go; the cube's audit
        events stay as tombstones with their payloads blanked.
        """
        self._access.cube(user_id, cube_id, "admin")
        return self._store.delete_cube(cube_id, user_id)

    def list_cubes(self, *, user_id: str) -> list[Cube]:
        """The cubes ``user_id`` may read (owned or shared), oldest first."""
        return self._access.readable(user_id, None)

    def grant(self, cube_id: str, user_id: str, permission: str, *, by: str) -> Grant:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube; ``by`` needs admin."""
        if permission not in PERMISSIONS:
            raise ValidationError(
                f"permission {shown(permission)} is not one of {', '.join(PERMISSIONS)}"
            )
        cube = self._access.cube(by, cube_id, "admin")
        self._access.user(user_id)
        if user_id == cube.owner and permission != "admin":
            raise ValidationError("the owner of a cube always keeps admin")
        grant = Grant(cube_id, user_id, permission, by)  # type: ignore[arg-type]
        self._store.put_grant(grant)
        return grant

    def share(self, cube_id: str, user_id: str, permission: str = "read", *, by: str) -> Grant:
        """``grant`` under MemOS's name: give ``user_id`` ``permission`` on a cube."""
        return self.grant(cube_id, user_id, permission, by=by)

    def revoke(self, cube_id: str, user_id: str, *, by: str) -> None:
        """Take away ``user_id``'s grant on a cube (``by`` needs admin); the owner keeps admin."""
        cube = self._access.cube(by, cube_id, "admin")
        self._access.user(user_id)
        if user_id == cube.owner:
            raise ValidationError("the owner of a cube always keeps admin")
        if not self._store.delete_grant(cube_id, user_id, by):
            raise NotFoundError(f"user {user_id!r} holds no grant on cube {cube_id!r}")

    def grants(self, cube_id: str, *, by: str) -> list[Grant]:
        """Who holds what on a cube (``by`` needs admin), oldest grant first."""
        self._access.cube(by, cube_id, "admin")
        return self._store.list_grants(cube_id)

    def stats(self, *, user_id: str, cube_id: str | None = None) -> dict[str, Any]:
        """Per readable cube (or just ``cube_id``): items by tier and type, tasks, LLM usage."""
        result: dict[str, Any] = {}
        for cube in self._access.readable(user_id, None if cube_id is None else [cube_id]):
            live = Filters()
            counts = {
                f"{tier}/{kind}": n
                for tier in TIERS
                for kind in ITEM_TYPES
                if (
                    n := self._store.count_items(
                        cube.cube_id, replace(live, tiers=(tier,), types=(kind,))
                    )
                )
            }
            pending = self._parts.scheduler.queue.tasks(
                cube_id=cube.cube_id, status="pending", limit=MAX_TOP_K
            )
            result[cube.cube_id] = {
                "name": cube.name,
                "items": counts,
                "pending_tasks": len(pending),
                "llm_usage": dict(self._store.llm_usage(cube.cube_id)),
            }
        return result

    def llm_usage_by_day(
        self, cube_id: str, *, user_id: str, days: int = 30
    ) -> list[tuple[str, LLMUsage]]:
        """The cube's LLM calls and tokens per UTC day over the last ``days`` (1–366) days,
        days with calls only, oldest first, as (``YYYY-MM-DD``, usage).  Needs ``read``.
        Calls made before a database had schema 7 are in ``stats``' totals only."""
        check_int(days, "days", 1, 366)
        self._access.cube(user_id, cube_id, "read")
        return self._store.llm_usage_by_day(cube_id, days)

    def configure(self, /, *, by: str, **changes: Any) -> Settings:
        """Change runtime settings (``RUNTIME_SETTINGS``) for every process serving this
        database (recorded in it: the others apply them before their next search); ``by`` is an
        admin."""
        self._access.admin(by)
        unknown = sorted(set(changes) - set(self.RUNTIME_SETTINGS))
        if unknown:
            raise ValidationError(
                f"setting(s) {', '.join(unknown)} cannot be changed at run time",
                hint=f"runtime settings: {', '.join(self.RUNTIME_SETTINGS)}",
            )
        try:  # the ranges are checked by every Settings (``config.RUNTIME_RANGES``)
            updated = Settings.from_mapping({**vars(self._parts.settings), **changes})
        except ConfigurationError as exc:
            raise ValidationError(exc.message, hint=exc.hint) from exc
        return self._parts.share_settings({name: getattr(updated, name) for name in changes})
