"""Moving a MemCube to another cube id and owner, optionally with new item and artifact ids."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memstrata.memcube.records import MemCube
from memstrata.model import MemoryItem

#: A word that may be an id (trailing punctuation is tried without).
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]*")


def rehome(
    data: MemCube,
    *,
    cube_id: str,
    owner: str,
    item_ids: Mapping[str, str] | None = None,
    artifact_ids: Mapping[str, str] | None = None,
) -> MemCube:
    """``data`` as cube ``cube_id`` owned by ``owner``, items and artifacts renamed by the maps.

    Every reference to a renamed item follows: ``merged_into``, ``segment_id``, sources, the
    vector ids, versions' snapshots, events' ``item_id``, and in events' ``before``/``after``
    any string equal to an old id (and the item ids inside a ``sources`` value); in the
    ``reason`` of versions and events (written by the system, e.g. "merged into ID") an old id
    standing as a word.  Ids not in a map, and every other field (texts, metadata, user ids,
    speakers, times), stay exactly as they are.
    """
    ids = dict(item_ids or {})
    renamed = dict(artifact_ids or {})

    def item(old: MemoryItem) -> MemoryItem:
        return replace(
            old,
            id=ids.get(old.id, old.id),
            cube_id=cube_id,
            merged_into=None
            if old.merged_into is None
            else ids.get(old.merged_into, old.merged_into),
            segment_id=None if old.segment_id is None else ids.get(old.segment_id, old.segment_id),
            sources=[
                replace(s, item_id=ids.get(s.item_id, s.item_id)) if s.item_id else s
                for s in old.sources
            ],
        )

    return MemCube(
        cube=replace(data.cube, cube_id=cube_id, owner=owner),
        items=[item(i) for i in data.items],
        versions={
            ids.get(k, k): [
                replace(v, item=item(v.item), reason=_rename_words(v.reason, ids)) for v in stored
            ]
            for k, stored in data.versions.items()
        },
        vector_ids=[ids.get(i, i) for i in data.vector_ids],
        vectors=data.vectors,
        events=[
            replace(
                e,
                cube_id=cube_id,
                item_id=None if e.item_id is None else ids.get(e.item_id, e.item_id),
                before=_rename_in(e.before, ids),
                after=_rename_in(e.after, ids),
                reason=_rename_words(e.reason, ids),
            )
            for e in data.events
        ],
        artifacts=[
            replace(a, artifact_id=renamed.get(a.artifact_id, a.artifact_id))
            for a in data.artifacts
        ],
    )


def _rename_in(payload: Any, ids: Mapping[str, str], key: str | None = None) -> Any:
    """``payload`` with old ids replaced (a ``sources`` string is JSON holding item ids)."""
    if not ids or payload is None:
        return payload
    if isinstance(payload, str):
        if key == "sources" and payload.startswith("["):
            try:
                sources = json.loads(payload)
            except ValueError:
                return payload
            renamed = _rename_in(sources, ids)
            if renamed != sources:
                return json.dumps(renamed, ensure_ascii=False, separators=(",", ":"))
        return ids.get(payload, payload)
    if isinstance(payload, list):
        return [_rename_in(v, ids) for v in payload]
    if isinstance(payload, dict):
        return {k: _rename_in(v, ids, k) for k, v in payload.items()}
    return payload


def _rename_words(text: str | None, ids: Mapping[str, str]) -> str | None:
    """``text`` with every word that is an old id replaced by its new id."""
    if text is None or not ids:
        return text

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        core = word.rstrip(".:@-")
        return ids[core] + word[len(core) :] if core in ids else word

    return _WORD.sub(swap, text)
