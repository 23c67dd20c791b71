"""Typed, checked reads of the JSON objects of a MemCube (``Fields``), for ``records``."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, NoReturn, cast

from memstrata.errors import MemCubeError
from memstrata.model import Source, from_epoch, to_epoch

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
MAX_INT = 2**63 - 1  # SQLite's INTEGER


class Fields:
    """Typed reads of one JSON object of a MemCube; each failure names the place and the field.

    A field that is absent reads as null; unknown fields are refused.
    """

    def __init__(self, raw: object, where: str, known: Sequence[str]) -> None:
        if not isinstance(raw, dict):
            raise MemCubeError(f"{where}: expected a JSON object")
        unknown = [str(k) for k in raw if k not in known]
        if unknown:
            raise MemCubeError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
        self.raw: dict[str, Any] = raw
        self.where = where

    def fail(self, key: str, expected: str) -> NoReturn:
        raise MemCubeError(f"{self.where}: field {key!r} must be {expected}")

    def string(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is not None and not isinstance(value, str):
            self.fail(key, "a string or null")
        return value

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        if not isinstance(value, str):
            self.fail(key, "a string")
        return value

    def ident(self, key: str) -> str:
        value = self.raw.get(key)
        if not isinstance(value, str) or not ID_PATTERN.match(value):
            self.fail(key, "an id (1-128 letters, digits and _ . : @ -, first a letter or digit)")
        return value

    def choice(self, key: str, choices: Sequence[str]) -> str:
        value = self.raw.get(key)
        if value not in choices:
            self.fail(key, f"one of {', '.join(choices)}")
        return cast(str, value)

    def integer(self, key: str, minimum: int = 0) -> int | None:
        value = self.raw.get(key)
        if value is not None and (type(value) is not int or not minimum <= value <= MAX_INT):
            self.fail(key, f"an integer from {minimum} to {MAX_INT}, or null")
        return value

    def count(self, key: str, minimum: int = 0, default: int | None = None) -> int:
        value = self.integer(key, minimum)
        if value is not None:
            return value
        if default is None:
            self.fail(key, f"an integer of at least {minimum}")
        return default

    def number(self, key: str) -> float | None:
        """A finite number, as a float (as the database keeps it)."""
        value = self.raw.get(key)
        if value is None:
            return None
        try:
            number = float(value) if type(value) in (int, float) else math.nan
        except OverflowError:
            number = math.nan
        if not math.isfinite(number):
            self.fail(key, "a finite number or null")
        return number

    def flag(self, key: str) -> bool:
        value = self.raw.get(key, False)
        if not isinstance(value, bool):
            self.fail(key, "true or false")
        return value

    def optional_time(self, key: str) -> datetime | None:
        """A time with a zone, as UTC, that the database can hold: it keeps epoch seconds, and
        must read them back as a time (the last microseconds of year 9999 round into 10000)."""
        value = self.raw.get(key)
        if value is None:
            return None
        text = value[:-1] + "+00:00" if isinstance(value, str) and value.endswith("Z") else value
        try:
            parsed = datetime.fromisoformat(text) if isinstance(text, str) else None
            utc = (
                None if parsed is None or parsed.tzinfo is None else parsed.astimezone(timezone.utc)
            )
            if utc is not None:
                from_epoch(to_epoch(utc))
        except (ValueError, OverflowError, OSError):  # out of range once in UTC, or stored
            utc = None
        if utc is None:
            self.fail(
                key,
                "an ISO 8601 time with a time zone from year 1 to 9999, "
                "e.g. 2024-05-08T13:56:00.000000Z",
            )
        return utc

    def time(self, key: str) -> datetime:
        value = self.optional_time(key)
        if value is None:
            self.fail(key, "an ISO 8601 time")
        return value

    def strings(self, key: str) -> list[str]:
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, "an array of strings")
        return value

    def mapping(self, key: str, *, required: bool = False) -> dict[str, Any]:
        value = self.raw.get(key)
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            self.fail(key, "a JSON object")
        return value

    def sources(self, key: str) -> list[Source]:
        listed = self.raw.get(key) or []
        if not isinstance(listed, list):
            self.fail(key, "an array of sources")
        found: list[Source] = []
        for n, raw in enumerate(listed, 1):
            f = Fields(raw, f"{self.where} {key}[{n}]", ("item_id", "uri", "span", "role"))
            span = f.raw.get("span")
            if span is not None and not (
                isinstance(span, list) and len(span) == 2 and all(type(x) is int for x in span)
            ):
                f.fail("span", "[start, end] (two integers) or null")
            where = None if span is None else (span[0], span[1])
            found.append(Source(f.string("item_id"), f.string("uri"), where, f.string("role")))
        return found
