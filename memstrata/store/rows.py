"""Mapping between model objects and SQL: rows, column lists, full-text bodies, filter clauses.

Everything here is a pure function of its arguments (no connection), shared by both engines
(SQLite and PostgreSQL store the same columns the same way: times as epoch seconds, lists and
objects as JSON text), so a row is written and read one way only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from memstrata.errors import ConflictError
from memstrata.memcube import Artifact
from memstrata.model import (
    ApiKey,
    Cube,
    Event,
    Grant,
    ItemType,
    MemoryItem,
    Source,
    Status,
    Tier,
    User,
    Version,
    from_epoch,
    to_epoch,
)
from memstrata.text import index_body

#: Item columns in table order, except ``rid`` and ``seq`` which the store assigns.
ITEM_COLUMNS = (
    "id", "cube_id", "version", "tier", "type", "status", "session_id", "user_id", "agent_id",
    "role", "speaker", "text", "key", "keywords", "tags", "metadata", "external_id", "event_time",
    "created_at", "updated_at", "valid_from", "valid_to", "merged_into", "confidence", "pinned",
    "access_count", "last_accessed_at", "heat", "sources", "segment_id", "expires_at",
)  # fmt: skip
ARTIFACT_COLUMNS = "artifact_id, kind, path, fingerprint, sha256, size_bytes, metadata, created_at"
#: A cube's version snapshots with their items' ids, in order (``versions_by_item`` reads them).
VERSION_COLUMNS = "v.item_id, v.version, v.snapshot, v.at, v.actor, v.reason"
USER_COLUMNS = "user_id, name, role, created_at"
CUBE_COLUMNS = "cube_id, name, owner, kind, settings, embedder, created_at"
EVENT_COLUMNS = "seq, at, actor, cube_id, item_id, op, before, after, version, reason"
_TIMES = (
    "event_time", "created_at", "updated_at", "valid_from", "valid_to", "last_accessed_at",
    "expires_at",
)  # fmt: skip
_JSON = ("keywords", "tags", "metadata")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def item_to_row(item: MemoryItem) -> tuple[Any, ...]:
    """Values for ``ITEM_COLUMNS``."""
    values = item_to_dict(item)
    return tuple(values[c] for c in ITEM_COLUMNS)


def item_to_dict(item: MemoryItem) -> dict[str, Any]:
    """A JSON-ready dict of every field (times as epoch seconds): a version snapshot."""
    out: dict[str, Any] = {c: getattr(item, c) for c in ITEM_COLUMNS if c != "sources"}
    for c in _TIMES:
        out[c] = to_epoch(out[c])
    for c in _JSON:
        out[c] = dumps(out[c])
    out["pinned"] = int(item.pinned)
    out["sources"] = dumps([s.to_dict() for s in item.sources])
    return out


def item_from_dict(row: dict[str, Any] | Any) -> MemoryItem:
    """A ``MemoryItem`` from a row (``sqlite3.Row`` or a dict row) or a version snapshot."""
    keys = row.keys()
    if len(keys) == len(ITEM_COLUMNS) and tuple(keys) == ITEM_COLUMNS:
        # A row of ``SELECT`` (every item read): by position.  A ``sqlite3.Row`` looks a name
        # up by comparing it with each column name in turn, so 31 lookups by name cost more
        # than the rest of the mapping together (2.5 of 3.9 ms for 100 rows).
        return item_from_values(tuple(row.values()) if isinstance(row, dict) else tuple(row))
    get = row.__getitem__
    return MemoryItem(
        id=get("id"),
        cube_id=get("cube_id"),
        text=get("text"),
        version=get("version"),
        tier=cast(Tier, get("tier")),
        type=cast(ItemType, get("type")),
        status=cast(Status, get("status")),
        session_id=get("session_id"),
        user_id=get("user_id"),
        agent_id=get("agent_id"),
        role=get("role"),
        speaker=get("speaker"),
        key=get("key"),
        keywords=_loads(get("keywords")),
        tags=_loads(get("tags")),
        metadata=_loads(get("metadata")),
        external_id=get("external_id"),
        event_time=to_datetime(get("event_time")),
        created_at=to_datetime(get("created_at")),
        updated_at=to_datetime(get("updated_at")),
        valid_from=from_epoch(get("valid_from")),
        valid_to=from_epoch(get("valid_to")),
        merged_into=get("merged_into"),
        confidence=get("confidence"),
        pinned=bool(get("pinned")),
        access_count=get("access_count"),
        last_accessed_at=from_epoch(get("last_accessed_at")),
        heat=get("heat"),
        sources=[Source.from_dict(s) for s in _loads(get("sources"))],
        segment_id=_optional(get, "segment_id"),
        expires_at=from_epoch(_optional(get, "expires_at")),
    )


def item_from_values(values: Sequence[Any]) -> MemoryItem:
    """A ``MemoryItem`` from the values of ``ITEM_COLUMNS``, in that order."""
    (id_, cube_id, version, tier, type_, status, session_id, user_id, agent_id, role, speaker,
     text, key, keywords, tags, metadata, external_id, event_time, created_at, updated_at,
     valid_from, valid_to, merged_into, confidence, pinned, access_count, last_accessed_at,
     heat, sources, segment_id, expires_at) = values  # fmt: skip
    # Inlined (no helper calls): a search maps about a hundred rows (7 µs each, 8 before).
    at, utc = datetime.fromtimestamp, timezone.utc
    return MemoryItem(
        id=id_,
        cube_id=cube_id,
        text=text,
        version=version,
        tier=tier,
        type=type_,
        status=status,
        session_id=session_id,
        user_id=user_id,
        agent_id=agent_id,
        role=role,
        speaker=speaker,
        key=key,
        keywords=[] if keywords == "[]" else json.loads(keywords),
        tags=[] if tags == "[]" else json.loads(tags),
        metadata={} if metadata == "{}" else json.loads(metadata),
        external_id=external_id,
        event_time=at(event_time, utc),
        created_at=at(created_at, utc),
        updated_at=at(updated_at, utc),
        valid_from=None if valid_from is None else at(valid_from, utc),
        valid_to=None if valid_to is None else at(valid_to, utc),
        merged_into=merged_into,
        confidence=confidence,
        pinned=bool(pinned),
        access_count=access_count,
        last_accessed_at=None if last_accessed_at is None else at(last_accessed_at, utc),
        heat=heat,
        sources=[] if sources == "[]" else list(_sources(sources)),
        segment_id=segment_id,
        expires_at=None if expires_at is None else at(expires_at, utc),
    )


@lru_cache(maxsize=8192)
def _sources(text: str) -> tuple[Source, ...]:
    """The ``Source`` list stored as ``text``, parsed once per distinct text.

    A search maps about a hundred rows and a cube's profile items are among most searches'
    candidates, each with its sources (at 10k turns, about 100 ``Source`` values a search).
    ``Source`` is frozen, so the parsed values are shared; every item gets a list of its own.
    """
    return tuple(Source.from_dict(s) for s in json.loads(text))


def _loads(text: str) -> Any:
    """``json.loads``, without the parser for the empty list and object most rows hold."""
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def _optional(get: Any, column: str) -> Any:
    """A column added after schema 1 (``segment_id`` in 2, ``expires_at`` in 8), or None: version
    snapshots written before it have no such key."""
    try:
        return get(column)
    except (KeyError, IndexError):  # a dict says KeyError, a sqlite3.Row IndexError
        return None


def to_datetime(seconds: float) -> datetime:
    """A NOT NULL time column as a UTC datetime."""
    return datetime.fromtimestamp(seconds, timezone.utc)


def artifact_row(artifact: Artifact, path: str) -> tuple[Any, ...]:
    """The values of ``ARTIFACT_COLUMNS`` for ``artifact``, whose file is stored as ``path``."""
    return (
        artifact.artifact_id, artifact.kind, path, artifact.fingerprint, artifact.sha256,
        artifact.size_bytes, dumps(artifact.metadata), to_epoch(artifact.created_at),
    )  # fmt: skip


def artifact_from_row(row: Sequence[Any], base: Path) -> Artifact:
    """An ``Artifact`` from a row of ``ARTIFACT_COLUMNS``; a relative path is relative to
    ``base`` (an absolute one stays as it is)."""
    artifact_id, kind, path, fingerprint, sha256, size_bytes, metadata, created_at = row
    return Artifact(
        artifact_id=artifact_id,
        kind=kind,
        fingerprint=fingerprint,
        path=base / path,
        sha256=sha256,
        size_bytes=size_bytes,
        metadata=json.loads(metadata),
        created_at=to_datetime(created_at),
    )


def versions_by_item(found: Iterable[Sequence[Any]]) -> dict[str, list[Version]]:
    """Rows of ``VERSION_COLUMNS`` grouped by item id (in the order given)."""
    versions: dict[str, list[Version]] = {}
    for item_id, version, snapshot, at, actor, reason in found:
        item = item_from_dict(json.loads(snapshot))
        versions.setdefault(item_id, []).append(
            Version(version, item, to_datetime(at), actor, reason)
        )
    return versions


def fingerprint_dim(fingerprint: str | None) -> int:
    """The dimension at the end of a ``model_id/dim`` fingerprint (0 when there is none)."""
    tail = (fingerprint or "").rpartition("/")[2]
    return int(tail) if tail.isdigit() else 0


def user_from_row(row: Sequence[Any]) -> User:
    user_id, name, role, created_at = row
    return User(user_id=user_id, name=name, role=role, created_at=to_datetime(created_at))


def cube_from_row(row: Sequence[Any]) -> Cube:
    cube_id, name, owner, kind, settings, embedder, created_at = row
    return Cube(
        cube_id=cube_id,
        name=name,
        owner=owner,
        kind=kind,
        settings=json.loads(settings),
        embedder=embedder,
        created_at=to_datetime(created_at),
    )


def key_from_row(row: Sequence[Any]) -> ApiKey:
    key_id, user_id, label, created_at, revoked_at = row
    revoked = None if revoked_at is None else to_datetime(revoked_at)
    return ApiKey(key_id, user_id, label, to_datetime(created_at), revoked)


def grant_from_row(row: Sequence[Any]) -> Grant:
    cube_id, user_id, permission, granted_by, granted_at = row
    return Grant(cube_id, user_id, permission, granted_by, to_datetime(granted_at))


def event_from_row(row: Sequence[Any]) -> Event:
    seq, at, actor, cube_id, item_id, op, before, after, version, reason = row
    return Event(
        seq=seq,
        at=to_datetime(at),
        actor=actor,
        cube_id=cube_id,
        item_id=item_id,
        op=op,
        before=None if before is None else json.loads(before),
        after=None if after is None else json.loads(after),
        version=version,
        reason=reason,
    )


def fts_body(item: MemoryItem) -> str:
    """What the full-text index holds for an item: its text, key and keywords (cube-prefixed)."""
    return index_body(" ".join([item.text, item.key or "", *item.keywords]), item.cube_id)


def changes(old: MemoryItem, new: MemoryItem) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields that changed, before and after (bookkeeping fields left out).

    A list that only grew at its end (a segment's pages, as each page joins) is recorded as
    ``"<field>+": [the new entries]``, not twice in full: else a segment of n pages would write
    events of O(n) size n times.
    """
    a, b = item_to_dict(old), item_to_dict(new)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for k in a:
        if a[k] == b[k] or k in ("version", "updated_at"):
            continue
        grown = _appended(a[k], b[k])
        if grown is not None:
            after[k + "+"] = grown
        else:
            before[k], after[k] = a[k], b[k]
    return before, after


def _appended(old: Any, new: Any) -> list[Any] | None:
    """What was added at the end of a (JSON-encoded) non-empty list, or None for other changes."""
    if not (isinstance(old, str) and isinstance(new, str) and old.startswith("[")):
        return None
    was, now = json.loads(old), json.loads(new)
    if not was or not isinstance(now, list) or now[: len(was)] != was:
        return None
    return list(now[len(was) :])


def resent(item: MemoryItem, stored_id: str, text: str, first: Callable[[], str | None]) -> str:
    """``stored_id`` when ``item`` re-sends the message stored under its external id: the
    stored text, or the text it was first stored with (``first()``, read only when needed: a
    script run twice re-sends what it sent though the item was updated since).  Any other text
    is a ``ConflictError``: one external id is one message.  The rule of both engines."""
    if item.text == text or item.text == first():
        return stored_id
    raise ConflictError(
        f"external id {item.external_id!r} is already stored in cube {item.cube_id!r} "
        f"as item {stored_id!r} with other text",
        hint="use update() to change it, or another id",
    )


def first_text(snapshot: str | None) -> str | None:
    """The text of an item's first version, from its snapshot (None when there is none)."""
    return None if snapshot is None else str(json.loads(snapshot).get("text"))
