"""Lifecycle and governance as ``MemoryOS`` methods (DESIGN §5, docs/lifecycle.md).

State transitions (``lifecycle.states``), rollback to an old version, the audit trail, erasure
(``lifecycle.erase``) and MemCube export and import (``memstrata.memory.cubes``).  Reading as of a
past time is part of ``get`` and ``search`` (``lifecycle.history``).
"""

from __future__ import annotations

import os
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
from memstrata.memcube import Manifest
from memstrata.memory import cubes as cube_ops
from memstrata.memory import erase
from memstrata.memory.access import MemoryCore
from memstrata.model import Cube, Event, MemoryItem, parse_time
from memstrata.text import embedding_text

MAX_AUDIT_LIMIT = 10_000
#: What ``rollback`` copies from the old version (placement and bookkeeping stay as they are).
_RESTORED = (
    "text", "key", "keywords", "tags", "metadata", "status", "valid_from", "valid_to",
    "confidence", "pinned", "sources", "merged_into",
)  # fmt: skip


class Governance(MemoryCore):
    """``MemoryOS``'s calls for transitions, rollback, audit, erasure, export and import."""

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
        user = self.get_user(by)
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_AUDIT_LIMIT
        ):
            raise ValidationError(f"limit must be an integer from 1 to {MAX_AUDIT_LIMIT}")
        at = None if since is None else parse_time(since, "since")
        if user.role == "admin":  # administrators read every event, grant or not
            if item_id is not None and not self.store.get_items([item_id]):
                raise ItemNotFound(item_id, cube_id)
            if cube_id is not None and self.store.get_cube(cube_id) is None:
                raise CubeNotFound(cube_id)
        elif item_id is not None:
            cube_id = self._item(item_id, by, "admin", cube_id).cube_id
        elif cube_id is not None:
            self._require(by, cube_id, "admin")
        else:
            raise AdminRequired(by)
        return self.store.events(cube_id=cube_id, item_id=item_id, since=at, limit=limit)

    def erase(
        self,
        item_id: str | None = None,
        *,
        user_id: str,
        session_id: str | None = None,
        cube_id: str | None = None,
        subject_user_id: str | None = None,
        reason: str | None = None,
    ) -> int:
        """Erase for good (GDPR): one item, a session of a cube, a whole cube, or everything
        ``subject_user_id`` said; returns how many items were erased.

        Content leaves the items, versions, full-text index, vectors, caches, task payloads and
        event payloads; tombstones (ids, times, ops) stay.  Items derived from erased ones
        (facts, segments, profile entries citing them) are erased too.  Needs ``write`` for an
        item or a session, ``admin`` for a cube; a subject's data may be erased by that user or
        an administrator (in every cube).  See ``lifecycle.erase``.
        """
        return erase.erase(
            self, user_id, item_id=item_id, session_id=session_id, cube_id=cube_id,
            subject_user_id=subject_user_id, reason=reason,
        )  # fmt: skip

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
        by ``delete``/``erase``.  Writes a new version and an event with ``reason``.
        """
        item = self._item(item_id, user_id, "write", cube_id)
        target = states.check_transition(item.id, item.status, to)
        moved = replace(item, status=target)  # type: ignore[arg-type]
        return self.store.update_item(moved, None, op="transition", actor=user_id, reason=reason)

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
        ``write``.  History is kept: the rollback is itself a version and an event."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValidationError("version must be an integer")
        item = self._item(item_id, user_id, "write", cube_id)
        states.check_writable(item.id, item.status)
        versions = {v.version: v.item for v in self.store.versions(item.id)}
        if version not in versions:
            raise NotFoundError(
                f"item {item_id!r} has no version {version}",
                hint=f"its versions are 1 to {item.version}",
            )
        old = versions[version]
        cube = self._require(user_id, item.cube_id, "write")
        self._check_embedder(cube)
        restored = replace(item, **{name: getattr(old, name) for name in _RESTORED})
        vector = None
        if restored.text != item.text:
            vector = self.embedder.embed_passages([embedding_text(restored)])[0]
        why = reason or f"rollback to version {version}"
        return self.store.update_item(restored, vector, op="rollback", actor=user_id, reason=why)

    def export(self, cube_id: str, path: str | os.PathLike[str], *, user_id: str) -> Manifest:
        """Write cube ``cube_id`` as a MemCube (docs/memcube.md) at ``path``: a new directory, or
        a new ``.tar.gz``.  Needs ``admin``; never overwrites (``MemCubeError``); only reads.
        """
        return cube_ops.export_cube(self, cube_id, path, user_id=user_id)

    def import_cube(
        self,
        path: str | os.PathLike[str],
        *,
        owner: str,
        cube_id: str | None = None,
        keep_ids: bool = True,
        reembed: bool = False,
    ) -> Cube:
        """Import the MemCube at ``path`` as a new cube owned (``admin``) by ``owner``; all or
        nothing.  Ids, embedders and errors: see ``memstrata.memory.cubes.import_cube``.
        """
        return cube_ops.import_cube(
            self, path, owner=owner, cube_id=cube_id, keep_ids=keep_ids, reembed=reembed
        )
