"""Who a MemCube says did what, and how an import that may not say so takes it in.

A MemCube names users in four places: each item's ``user_id`` (who added it), the ``user_id`` of
its version snapshots, and the ``actor`` of each version and event.  ``named_users`` lists them;
``reclaim`` gives every name other than the importer's to the importer and keeps what the
MemCube said in each item's ``metadata["origin"]`` (docs/memcube.md, "Provenance").  Whether an
import keeps the names or reclaims them is the core's rule (``memory.cubes``).  Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

from memstrata.memcube.records import MemCube, iso
from memstrata.model import MemoryItem

#: The metadata key holding what an import changed about an item (see ``reclaim``).
ORIGIN = "origin"


def named_users(data: MemCube) -> set[str]:
    """Every user id ``data`` names: items' and snapshots' ``user_id``, versions' and events'
    ``actor`` (the system's own writes name nobody: their actor is null)."""
    return {name for name in _names(data) if name is not None}


def reclaim(data: MemCube, importer: str, *, at: datetime) -> MemCube:
    """``data`` as ``importer`` may bring it in: every user it names other than ``importer``
    becomes ``importer``, and each item so touched keeps what the MemCube said about it.

    An item whose ``user_id``, or the ``user_id`` or ``actor`` of one of its versions, or the
    ``actor`` of one of its events, names someone else gets ``ORIGIN`` in its ``metadata`` and
    in every snapshot's: an object of ``cube_id`` (the MemCube's cube), ``user_id`` (the item's,
    as the MemCube said), ``actors`` (the actors of its versions and events there, sorted),
    ``imported_by`` and ``at`` (``at`` as a MemCube time), plus ``previous``: whatever ``origin``
    the record held before (an earlier import's, or the user's own value).  Events not about an
    item (``grant``, ``create_cube``…) change actor only; nothing else changes.
    """
    actors = _actors_by_item(data)

    def foreign(name: str | None) -> bool:
        return name is not None and name != importer

    def origin_of(item: MemoryItem) -> dict[str, Any] | None:
        stored = data.versions.get(item.id, [])
        names = [item.user_id, *actors.get(item.id, ()), *(v.item.user_id for v in stored)]
        if not any(foreign(name) for name in names):
            return None
        return {
            "cube_id": data.cube.cube_id,
            "user_id": item.user_id,
            "actors": sorted(actors.get(item.id, set())),
            "imported_by": importer,
            "at": iso(at),
        }

    def claimed(item: MemoryItem, origin: dict[str, Any] | None) -> MemoryItem:
        if origin is None:
            return item
        metadata = dict(item.metadata)
        if ORIGIN in metadata:
            origin = {**origin, "previous": metadata[ORIGIN]}
        metadata[ORIGIN] = origin
        user_id = importer if foreign(item.user_id) else item.user_id
        return replace(item, user_id=user_id, metadata=metadata)

    origins = {item.id: origin_of(item) for item in data.items}
    return replace(
        data,
        items=[claimed(item, origins[item.id]) for item in data.items],
        versions={
            item_id: [
                replace(
                    v,
                    item=claimed(v.item, origins.get(item_id)),
                    actor=importer if foreign(v.actor) else v.actor,
                )
                for v in stored
            ]
            for item_id, stored in data.versions.items()
        },
        events=[replace(e, actor=importer) if foreign(e.actor) else e for e in data.events],
    )


def _names(data: MemCube) -> Iterator[str | None]:
    for item in data.items:
        yield item.user_id
    for stored in data.versions.values():
        for v in stored:
            yield v.item.user_id
            yield v.actor
    for event in data.events:
        yield event.actor


def _actors_by_item(data: MemCube) -> dict[str, set[str]]:
    """Item id → the non-null actors of its versions and events in ``data``."""
    found: dict[str, set[str]] = {}

    def note(item_id: str | None, actors: Iterable[str | None]) -> None:
        if item_id is not None:
            found.setdefault(item_id, set()).update(a for a in actors if a is not None)

    for item_id, stored in data.versions.items():
        note(item_id, (v.actor for v in stored))
    for event in data.events:
        note(event.item_id, [event.actor])
    return found
