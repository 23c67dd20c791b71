"""Lifecycle and governance (docs/lifecycle.md); ``MemoryOS`` delegates here.

State transitions (the rules are ``lifecycle.states``), rollback to an old version, the audit
trail, erasure (its scope: ``memory.erase``) and MemCube export and import (``memory.cubes``).
Reading as of a past time is part of ``get`` and ``search`` (``retrieval.history``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from memstrata.errors import (
    AdminRequired,
    CubeNotFound,
    ItemNotFound,
    NotFoundError,
    ValidationError,
)
from memstrata.lifecycle import states
from memstrata.limits import MAX_AUDIT_LIMIT, MAX_ID_CHARS, check_text
from memstrata.memcube import Manifest
from memstrata.memory import cubes, erase
from memstrata.memory.access import check_int, check_reason
from memstrata.memory.components import Components
from memstrata.memory.items import Items
from memstrata.model import Cube, Event, MemoryItem, parse_time

#: What ``rollback`` copies from the old version (placement and bookkeeping stay as they are).
_RESTORED = (
    "text", "key", "keywords", "tags", "metadata", "status", "valid_from", "valid_to",
    "confidence", "pinned", "sources", "merged_into",
)  # fmt: skip


class Governance:
    """``MemoryOS``'s calls for transitions, rollback, audit, erasure, export and import."""

    def __init__(self, parts: Components, items: Items) -> None:
        self._parts = parts
        self._store = parts.store
        self._access = parts.access
        self._items = items

    def audit(
        self,
        *,
        by: str,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: Any = None,
        limit: int = 1000,
    ) -> list[Event]:
        """The audit trail (append-only events), oldest first.

        An administrator may read every event; a cube admin the events of that cube (give
        ``cube_id`` or ``item_id``).  Erased content is absent from the events' payloads.
        """
        user = self._access.user(by)
        check_int(limit, "limit", 1, MAX_AUDIT_LIMIT)
        at = None if since is None else parse_time(since, "since")
        if user.role == "admin":  # administrators read every event, grant or not
            # the item known by id alone: its cube is looked up (item_cubes)
            if item_id is not None and not self._store.item_cubes([item_id]):
                raise ItemNotFound(item_id, cube_id)
            if cube_id is not None and self._store.get_cube(cube_id) is None:
                raise CubeNotFound(cube_id)
        elif item_id is not None:
            cube_id = self._access.item(item_id, by, "admin", cube_id).cube_id
        elif cube_id is not None:
            self._access.cube(by, cube_id, "admin")
        else:
            raise AdminRequired(by)
        return self._store.events(cube_id=cube_id, item_id=item_id, since=at, limit=limit)

    def erase(
        self,
        item_id: str | None = None,
        *,
        user_id: str,
        session_id: str | None = None,
        cube_id: str | None = None,
        subject_user_id: str | None = None,
        reason: str | None = None,
        own_data_only: bool = False,
    ) -> int:
        """Erase for good (GDPR): one item, a session of a cube, a whole cube, or everything
        ``subject_user_id`` said; returns how many items were erased.

        Content leaves the items, versions, full-text index, vectors, caches, task payloads and
        event payloads; tombstones (ids, times, ops) stay.  Items derived from erased ones
        (facts, segments, profile entries citing them) are erased too.  Needs ``write`` for an
        item or a session, ``admin`` for a cube; a subject's data may be erased by an
        administrator (in every cube) or by that user (in the cubes they may write) — only by
        that user with ``own_data_only`` (how an agent is let erase: it reads what others wrote
        and must not wipe their data).  See ``memory.erase``.  ``reason`` is a text of at most
        ``MAX_REASON`` characters and ``session_id`` one line of at most ``MAX_ID_CHARS``
        (else ``ValidationError``).
        """
        check_reason(reason)
        if session_id is not None:
            check_text(session_id, "session_id", MAX_ID_CHARS, line=True)
        scope = erase.Scope(item_id, session_id, cube_id, subject_user_id)
        return erase.erase(
            self._store, self._access, user_id, scope, reason=reason,
            own_data_only=own_data_only, forget=self._parts.forget,
        )  # fmt: skip

    def vacuum(self, *, user_id: str) -> dict[str, int]:
        """Make what erasures removed leave the database's files (``Store.compact``): SQLite
        keeps freed pages (zeroed) and a WAL until a checkpoint and ``VACUUM``, PostgreSQL old
        row versions until ``VACUUM FULL``.  Administrators only (``AdminRequired``); records a
        ``vacuum`` audit event with the sizes before and after, which it returns
        (``{"bytes_before", "bytes_after"}``)."""
        if self._access.user(user_id).role != "admin":
            raise AdminRequired(user_id)
        return self._store.compact(user_id)

    def transition(
        self,
        item_id: str,
        to: str,
        *,
        user_id: str,
        reason: str | None = None,
        cube_id: str | None = None,
    ) -> MemoryItem:
        """Move an item to another lifecycle state (``lifecycle.states``); needs ``write``.

        An illegal move is a ``ConflictError`` naming the legal ones; ``deleted`` is reached only
        by ``delete``/``erase``.  Writes a new version and an event with ``reason`` (a text of at
        most ``MAX_REASON`` characters, else ``ValidationError``).
        """
        check_reason(reason)
        item = self._access.item(item_id, user_id, "write", cube_id)
        target = states.check_transition(item.id, item.status, to)
        moved = replace(item, status=target)  # type: ignore[arg-type]
        return self._store.update_item(moved, None, op="transition", actor=user_id, reason=reason)

    def rollback(
        self,
        item_id: str,
        version: int,
        *,
        user_id: str,
        reason: str | None = None,
        cube_id: str | None = None,
    ) -> MemoryItem:
        """Write a new version equal to ``version`` of the item (content and state); needs
        ``write``.  History is kept: the rollback is itself a version and an event, with
        ``reason`` (a text of at most ``MAX_REASON`` characters, else ``ValidationError``)."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValidationError("version must be an integer")
        check_reason(reason)
        item = self._access.item(item_id, user_id, "write", cube_id)
        states.check_writable(item.id, item.status)
        versions = {v.version: v.item for v in self._store.versions(item.cube_id, item.id)}
        if version not in versions:
            raise NotFoundError(
                f"item {item_id!r} has no version {version}",
                hint=f"its versions are {_ranges(sorted(versions))}",
            )
        self._access.check_item_embedder(item)
        old = versions[version]
        restored = replace(item, **{name: getattr(old, name) for name in _RESTORED})
        why = reason or f"rollback to version {version}"
        return self._items.write_version(item, restored, user_id, "rollback", why)

    def export(
        self,
        cube_id: str,
        path: str | os.PathLike[str],
        *,
        user_id: str,
        artifacts: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> Manifest:
        """Write cube ``cube_id`` as a MemCube (docs/memcube.md) at ``path``: a new directory, or
        a new ``.tar.gz``; without ``artifacts``, leaving out its KV caches and adapters.  Needs
        ``admin``; never overwrites (``MemCubeError``); only reads.  ``progress(n, total)``
        hears of the items as they are written.
        """
        self._access.cube(user_id, cube_id, "admin")
        return cubes.export_cube(self._store, cube_id, path, artifacts=artifacts, progress=progress)

    def import_cube(
        self,
        path: str | os.PathLike[str],
        *,
        owner: str,
        by: str | None = None,
        cube_id: str | None = None,
        keep_ids: bool = True,
        reembed: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Cube:
        """Import the MemCube at ``path`` as a new cube owned (``admin``) by ``owner``; all or
        nothing.  ``by`` is who imports (default: ``owner``); only an administrator imports for
        someone else.  An administrator's import keeps the ids (with ``keep_ids``) and the users
        the MemCube names; anyone else's gets new ids and becomes the author of what the MemCube
        says others did, the original names kept in ``metadata["origin"]``.  Ids, claims,
        embedders, errors and what ``progress(n, total)`` hears: see
        ``memstrata.memory.cubes.import_cube``.
        """
        importer = owner if by is None else by
        self._access.self_or_admin(importer, owner)
        cube = cubes.import_cube(
            self._store, self._parts.embedder, path, owner=owner,
            importer=self._access.user(importer), cube_id=cube_id, keep_ids=keep_ids,
            reembed=reembed, progress=progress,
        )  # fmt: skip
        self._parts.index.added(cube.cube_id)  # a large import gets its index in the background
        return cube


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as "1 to 3, 5" (a segment's refreshes leave gaps in its versions)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]} to {r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
