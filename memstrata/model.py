"""The data model: users, cubes, grants, memory items, versions, events, hits.

Plain dataclasses with no behaviour beyond small conveniences; the store maps them to rows.
Times are timezone-aware UTC ``datetime`` objects.  Ids are time-sortable strings (see ``new_id``).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypedDict, get_args

Role = Literal["admin", "user"]
CubeKind = Literal["user", "agent", "session", "shared"]
Permission = Literal["read", "write", "admin"]
Tier = Literal["working", "mid", "long"]
ItemType = Literal[
    "turn", "segment", "fact", "profile", "preference", "knowledge", "chunk",
    "tool", "tool_call", "skill", "image",
]  # fmt: skip
Status = Literal["generated", "activated", "merged", "archived", "frozen", "deleted"]
#: What a piece of feedback asks (``MemoryOS.feedback``; read by ``reader.corrections``).
FeedbackKind = Literal["confirm", "correct", "invalidate", "forget"]

ROLES: tuple[str, ...] = get_args(Role)
CUBE_KINDS: tuple[str, ...] = get_args(CubeKind)
PERMISSIONS: tuple[str, ...] = get_args(Permission)
TIERS: tuple[str, ...] = get_args(Tier)
ITEM_TYPES: tuple[str, ...] = get_args(ItemType)
STATUSES: tuple[str, ...] = get_args(Status)
FEEDBACK_KINDS: tuple[str, ...] = get_args(FeedbackKind)
#: Types made from other items, which name them in ``sources`` (erased with them).
DERIVED_TYPES: tuple[str, ...] = ("segment", "fact", "profile", "preference", "knowledge")
#: Types of tool and skill memory (``memory.tools``, ``memory.skills``): a tool's schema, one
#: call of it, a skill distilled from a task; a search returns them when ``include`` asks.
TOOL_TYPES: tuple[str, ...] = ("tool", "tool_call")
SKILL_TYPES: tuple[str, ...] = ("skill",)
#: Statuses a default search returns.
SEARCHABLE_STATUSES: tuple[Status, ...] = ("generated", "activated")

_PERMISSION_RANK = {p: i for i, p in enumerate(PERMISSIONS)}


def permits(held: str | None, needed: str) -> bool:
    """True when a grant of ``held`` allows an operation needing ``needed`` (read < write < admin)."""
    return held is not None and _PERMISSION_RANK[held] >= _PERMISSION_RANK[needed]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def to_epoch(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


def from_epoch(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_id_lock = threading.Lock()
_last_id: tuple[int, int] = (0, 0)


def new_id() -> str:
    """A 26-character ULID: 48 bits of milliseconds then 80 random bits, Crockford base32.

    Ids sort by creation time, and within one process strictly increase (the random part is
    incremented when two ids share a millisecond), so ``ORDER BY id`` is creation order.
    """
    global _last_id
    with _id_lock:
        ms = int(time.time() * 1000)
        last_ms, last_rand = _last_id
        if ms <= last_ms:
            ms, rand = last_ms, last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _last_id = (ms, rand)
    value = (ms << 80) | (rand & ((1 << 80) - 1))
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


@dataclass(frozen=True)
class User:
    user_id: str
    name: str | None = None
    role: Role = "user"
    created_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class Cube:
    """A MemCube: the unit of isolation, sharing and export.

    ``embedder`` is the fingerprint (``model-id/dimension``) of the embedder that wrote its vectors.
    """

    cube_id: str
    name: str
    owner: str
    kind: CubeKind = "user"
    settings: dict[str, Any] = field(default_factory=dict)
    embedder: str | None = None
    created_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class ApiKey:
    """An API key's record.  ``secret`` is set only on the object ``create_key`` returns: the
    store keeps a hash, so a lost key cannot be shown again, only revoked and replaced."""

    key_id: str
    user_id: str
    label: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    revoked_at: datetime | None = None
    secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Grant:
    cube_id: str
    user_id: str
    permission: Permission
    granted_by: str | None = None
    granted_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class Source:
    """Provenance: where a derived item came from (an item id, or a URI with a span)."""

    item_id: str | None = None
    uri: str | None = None
    span: tuple[int, int] | None = None
    role: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.item_id is not None:
            out["item_id"] = self.item_id
        if self.uri is not None:
            out["uri"] = self.uri
        if self.span is not None:
            out["span"] = list(self.span)
        if self.role is not None:
            out["role"] = self.role
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Source:
        span = data.get("span")
        return cls(
            item_id=data.get("item_id"),
            uri=data.get("uri"),
            span=None if span is None else (int(span[0]), int(span[1])),
            role=data.get("role"),
        )


@dataclass
class MemoryItem:
    """One textual memory, in any tier.  Every field is stored; most are optional."""

    id: str
    cube_id: str
    text: str
    version: int = 1
    tier: Tier = "working"
    type: ItemType = "turn"
    session_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    role: str | None = None
    speaker: str | None = None
    key: str | None = None
    keywords: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None
    event_time: datetime = field(default_factory=utcnow)
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    status: Status = "generated"
    merged_into: str | None = None
    confidence: float | None = None
    pinned: bool = False
    access_count: int = 0
    last_accessed_at: datetime | None = None
    heat: float | None = None
    sources: list[Source] = field(default_factory=list)
    #: for a mid-tier page (a turn moved out of the working tier): the segment it belongs to
    segment_id: str | None = None
    #: when the item stops existing: from then on no read returns it, and the ``expire`` task
    #: erases it (``memory.expiry``); None: it never expires
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Version:
    """One version of an item as it stood after a change: who made it, when and why."""

    version: int
    item: MemoryItem
    at: datetime
    actor: str | None
    reason: str | None


@dataclass(frozen=True)
class ProfileAttribute:
    """One current attribute of a person's profile, with the turns that show it."""

    cube_id: str
    subject: str
    key: str
    value: str
    #: the attribute as a sentence ("Ann lives in Porto")
    text: str
    since: datetime | None
    evidence: list[str]
    item_id: str


@dataclass(frozen=True)
class Preference:
    """One current preference of a person, with the turns that show it."""

    cube_id: str
    subject: str
    #: the thing liked or disliked ("hiking"): the long-tier item's key
    key: str
    #: 1 likes, -1 dislikes (0: the item's metadata no longer says)
    polarity: int
    #: stated ("I love…") rather than shown ("I always…")
    explicit: bool
    #: the preference as a sentence ("Ann likes hiking")
    text: str
    since: datetime | None
    evidence: list[str]
    item_id: str


@dataclass(frozen=True)
class Event:
    """One append-only audit record."""

    seq: int
    at: datetime
    actor: str | None
    cube_id: str | None
    item_id: str | None
    op: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    version: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class FeedbackResult:
    """What ``MemoryOS.feedback`` did: the kind it read, the items it changed (confirmed,
    superseded, archived or erased), and for a correction the item holding the corrected
    statement."""

    kind: FeedbackKind
    cube_id: str
    affected: list[str]
    new_item_id: str | None = None


#: What a part of a hit's score is: a channel's RRF contribution, or an adjustment (a boost or
#: penalty) made after fusion.
PartKind = Literal["channel", "adjustment"]


@dataclass(frozen=True)
class Part:
    """One part of a hit's score (``Hit.parts``); a hit's parts' ``value``s sum to its score.

    A ``channel`` part is one channel's reciprocal-rank contribution (``name`` the channel,
    ``rank`` its 1-based rank there).  An ``adjustment`` is what a step after fusion added
    (negative: took away): ``name`` the step (``neighbour``, ``speaker``, ``date``, ``time``,
    ``chatter``, ``successor``, ``agreement``, ...), ``factor`` the multiplier it applied when it
    is one, and ``reason`` in words a person can check ("next turn of #2", "other speaker").
    """

    kind: PartKind
    name: str
    value: float
    reason: str = ""
    rank: int | None = None
    factor: float | None = None


@dataclass(frozen=True)
class Hit:
    """A search result: the item, its fused score (higher is better), each channel's rank, and
    the parts its score is made of (``parts``: empty when it was not recorded)."""

    item: MemoryItem
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    parts: tuple[Part, ...] = ()

    @property
    def cube_id(self) -> str:
        return self.item.cube_id


class LLMUsage(TypedDict):
    """A cube's LLM spending so far: chat calls made, prompt tokens sent, completion tokens
    received (all zero for a cube that never used an LLM)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int


def parse_time(value: object, what: str = "time") -> datetime:
    """A UTC datetime from a datetime (naive means UTC), epoch seconds, or an ISO 8601 string.

    Raises ``ValidationError`` naming ``what`` for anything else, and for a time that is not
    in the calendar once moved to UTC (9999-12-31T23:00-05:00 is in the year 10000).
    """
    from memstrata.errors import ValidationError

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), timezone.utc)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValidationError(f"{what} {value!r} is out of range") from exc
    parsed = value if isinstance(value, datetime) else _iso_time(value)
    if parsed is None:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:59] + "…"
        raise ValidationError(
            f"{what} {shown} is not a time",
            hint="use an ISO 8601 string such as 2024-05-08T13:56:00Z, epoch seconds, or a datetime",
        )
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError as exc:
        raise ValidationError(f"{what} {parsed.isoformat()} is out of range in UTC") from exc


def _iso_time(value: object) -> datetime | None:
    """``value`` read as an ISO 8601 time (``Z`` for UTC accepted), or None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
