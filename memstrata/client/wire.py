"""The API's JSON and server-sent events to and from the core's dataclasses."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypedDict, TypeVar
from urllib.parse import quote

import httpx
import pydantic

from memstrata.client.errors import ResponseError
from memstrata.errors import ValidationError
from memstrata.model import (
    ApiKey,
    Hit,
    MemoryItem,
)
from memstrata.retrieval.pack import Context

T = TypeVar("T")
#: A time as the API takes it: a datetime, an ISO 8601 string, or epoch seconds.
When = datetime | str | float

#: The longest ``/tasks/wait`` the server holds a request for, in seconds.
MAX_WAIT_S = 60.0
#: The filters ``GET /memories/{cube_id}`` lists by (query parameters).
LIST_FILTERS = ("session_id", "tier", "type", "status")


class Health(TypedDict):
    status: str
    version: str


#: One pydantic adapter per result type (building one is slow; using one is thread-safe).
_ADAPTERS: dict[type[Any], pydantic.TypeAdapter[Any]] = {}


def load_as(kind: type[T], data: Any) -> T:
    """``data`` (decoded JSON) as a ``kind`` dataclass; a body that does not fit is an error."""
    try:
        adapter = _ADAPTERS.get(kind) or _ADAPTERS.setdefault(kind, pydantic.TypeAdapter(kind))
        loaded: T = adapter.validate_python(data)
    except pydantic.ValidationError as exc:
        raise ResponseError(
            f"the server's answer is not a {kind.__name__}: {exc.errors()[0]['msg']}",
            status=502,
            code="bad_response",
            hint="are the client and the server the same memstrata version?",
        ) from exc
    return loaded


def hit_from(data: dict[str, Any]) -> Hit:
    shown = {name: value for name, value in data.items() if name != "score"}
    return Hit(item=load_as(MemoryItem, shown), score=float(data["score"]))


def context_from(data: dict[str, Any]) -> Context:
    """``items`` is the recent turns, then the hits' items: the recent turns come first."""
    hits = [hit_from(h) for h in data["hits"]]
    items = [load_as(MemoryItem, i) for i in data["items"]]
    return Context(
        text=data["text"],
        tokens=data["tokens"],
        budget=data["budget"],
        hits=hits,
        recent=items[: len(items) - len(hits)],
        profile=list(data["profile"]),
    )


def key_from(data: dict[str, Any]) -> ApiKey:
    """A key record; a new key's ``key`` is its ``secret``."""
    record = {k: v for k, v in data.items() if k != "key"}
    return replace(load_as(ApiKey, record), secret=data.get("key"))


def jsonable(value: object) -> str:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def json_body(fields: Mapping[str, Any]) -> bytes:
    """A JSON body of the fields that are not None (the server's defaults fill the rest)."""
    given = {name: value for name, value in fields.items() if value is not None}
    try:
        return json.dumps(given, default=jsonable, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"cannot send as JSON: {exc}") from exc


def time_param(value: When) -> str:
    """A time for a query or body: ISO 8601 (naive means UTC, as the server reads it) or epoch
    seconds."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def path_segment(value: str) -> str:
    """An id as one path segment (a '/' or '?' in it cannot change the path)."""
    return quote(str(value), safe="")


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """Server-sent events as (event name, decoded JSON data) pairs."""
    name, data = "message", []
    for line in until_done(lines):
        if line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
        elif not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []


def until_done(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` and a blank line (which ends an event the stream left open)."""
    yield from lines
    yield ""


def save_stream(response: httpx.Response, target: Path) -> None:
    """Write a streamed response's body to the new file ``target``; nothing is left on failure."""
    archive = target.open("xb")  # FileExistsError if it appeared meanwhile: not ours to remove
    try:
        with archive:
            for piece in response.iter_bytes():
                archive.write(piece)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
