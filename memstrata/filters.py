"""Search filters: what a caller may narrow a search by, validated once at the edge.

A filter dict accepts these keys (all optional)::

    session_id  str                      exact session
    tier        str | list[str]          working / mid / long
    type        str | list[str]          turn, segment, fact, profile, preference, knowledge, chunk
    status      str | list[str]          default: generated and activated
    since       time                     event_time >= since (ISO 8601, epoch seconds or datetime)
    until       time                     event_time <= until
    metadata    {key: scalar}            equality on the item's metadata (str, int, float, bool, None)

Anything else is a ``ValidationError`` that names the known keys.  Strings follow
``limits.check_text`` (a session id and metadata keys are single lines, metadata values texts);
at most ``limits.MAX_FILTER_KEYS`` metadata keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstrata.errors import ValidationError
from memstrata.limits import (
    MAX_CONTENT_CHARS,
    MAX_FILTER_KEYS,
    MAX_ID_CHARS,
    MAX_NAME,
    check_text,
    shown,
)
from memstrata.model import (
    ITEM_TYPES,
    SEARCHABLE_STATUSES,
    STATUSES,
    TIERS,
    MemoryItem,
    parse_time,
)

Scalar = str | int | float | bool | None
_KEYS = ("session_id", "tier", "type", "status", "since", "until", "metadata")


@dataclass(frozen=True)
class Filters:
    session_id: str | None = None
    tiers: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    statuses: tuple[str, ...] = SEARCHABLE_STATUSES
    since: datetime | None = None
    until: datetime | None = None
    metadata: Mapping[str, Scalar] = field(default_factory=dict)

    def matches(self, item: MemoryItem) -> bool:
        """Whether ``item`` passes these filters (the stores' rule, checked in memory)."""
        return (
            (self.session_id is None or item.session_id == self.session_id)
            and (self.tiers is None or item.tier in self.tiers)
            and (self.types is None or item.type in self.types)
            and item.status in self.statuses
            and (self.since is None or item.event_time >= self.since)
            and (self.until is None or item.event_time <= self.until)
            and all(same_json(item.metadata.get(k), v) for k, v in self.metadata.items())
        )


def same_json(stored: Any, wanted: Scalar) -> bool:
    """Whether a stored metadata value equals a filter's as JSON values do: a boolean only
    equals a boolean (``true`` is not ``1``, though Python's ``True == 1``), numbers equal by
    value (``1`` is ``1.0``), anything else by ``==``.  Both engines' SQL follows this rule."""
    if isinstance(stored, bool) or isinstance(wanted, bool):
        return isinstance(stored, bool) and isinstance(wanted, bool) and stored == wanted
    return bool(stored == wanted)


def parse_filters(value: Filters | Mapping[str, Any] | None) -> Filters:
    """A ``Filters`` from a mapping (see the module docstring), a ``Filters``, or None."""
    if value is None:
        return Filters()
    if isinstance(value, Filters):
        return value
    if not isinstance(value, Mapping):
        raise ValidationError(f"filters must be a mapping, not {type(value).__name__}")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise ValidationError(
            f"unknown filter key(s): {shown(unknown)}",
            hint=f"known keys: {', '.join(_KEYS)}",
        )
    session_id = value.get("session_id")
    if session_id is not None:
        check_text(session_id, "filter session_id", MAX_ID_CHARS, line=True)
    since = _time(value, "since")
    until = _time(value, "until")
    if since and until and since > until:
        raise ValidationError("filter since is after until")
    statuses = _choices(value, "status", STATUSES)
    return Filters(
        session_id=session_id,
        tiers=_choices(value, "tier", TIERS),
        types=_choices(value, "type", ITEM_TYPES),
        statuses=SEARCHABLE_STATUSES if statuses is None else statuses,
        since=since,
        until=until,
        metadata=_metadata(value.get("metadata")),
    )


def _choices(
    value: Mapping[str, Any], key: str, allowed: tuple[str, ...]
) -> tuple[str, ...] | None:
    raw = value.get(key)
    if raw is None:
        return None
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple)) or not items:
        raise ValidationError(f"filter {key} must be a string or a non-empty list of strings")
    bad = [v for v in items if v not in allowed]
    if bad:
        raise ValidationError(
            f"filter {key} has unknown value(s) {shown(bad)}", hint=f"allowed: {', '.join(allowed)}"
        )
    return tuple(dict.fromkeys(items))


def _time(value: Mapping[str, Any], key: str) -> datetime | None:
    raw = value.get(key)
    return None if raw is None else parse_time(raw, f"filter {key}")


def _metadata(raw: Any) -> dict[str, Scalar]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError("filter metadata must be a mapping of key to value")
    if len(raw) > MAX_FILTER_KEYS:
        raise ValidationError(
            f"filter metadata has {len(raw)} keys; at most {MAX_FILTER_KEYS} are allowed"
        )
    for key, val in raw.items():
        if isinstance(key, str):
            check_text(key, "filter metadata key", MAX_NAME, line=True)
        if not isinstance(key, str) or not key or '"' in key:
            raise ValidationError(
                f"filter metadata key {shown(key)} must be a non-empty string without double quotes"
            )
        if isinstance(val, str):
            check_text(val, f"filter metadata[{key!r}]", MAX_CONTENT_CHARS)
        elif isinstance(val, int) and not isinstance(val, bool) and not -(2**63) <= val < 2**63:
            raise ValidationError(f"filter metadata[{key!r}] is out of the 64-bit integer range")
        elif isinstance(val, float) and not math.isfinite(val):
            raise ValidationError(f"filter metadata[{key!r}] must be a finite number")
        elif val is not None and not isinstance(val, (int, float, bool)):
            raise ValidationError(
                f"filter metadata[{key!r}] must be a string, number, boolean or null"
            )
    return dict(raw)
