"""The HTTP under ``Client``: one ``httpx.Client``, requests in the API's JSON, errors mapped once.

Every request goes through ``Transport.request``: an error response becomes the exception its
``code`` names (``errors.error_of``), a connection that fails ``ServerUnreachable``.  Answers are
read back into the core's types by ``memstrata.wire``; one that does not fit is a
``ResponseError`` (``bad_response``), never a value filled in with a default.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from memstrata.client.errors import ResponseError, error_of, unreachable
from memstrata.errors import ValidationError
from memstrata.wire import WireError, record_from_wire

T = TypeVar("T")
#: A time as the API takes it: a datetime, an ISO 8601 string, or epoch seconds.
When = datetime | str | float


class Transport:
    """Requests to the API at ``base_url`` as the user of ``api_key``; thread-safe.

    ``timeout`` is in seconds, per request; ``request`` may add to it.
    """

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        self.timeout = timeout
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        timeout: float = 0.0,
        stream: bool = False,
        **options: Any,
    ) -> httpx.Response:
        """Send one request; an error response or no answer raises (see the module docs).

        ``body`` is sent as JSON (its None fields left out); ``timeout`` is added to the
        client's; a ``stream`` response is left open on success.
        """
        if body is not None:
            options["content"] = json_body(body)
            options["headers"] = {"Content-Type": "application/json"}
        request = self._http.build_request(method, path, timeout=self.timeout + timeout, **options)
        try:
            response = self._http.send(request, stream=stream)
            if response.is_error and stream:
                response.read()
        except httpx.TransportError as exc:
            raise unreachable(method, request.url, exc) from exc
        if response.is_error:
            response.close()
            raise error_of(response)
        return response

    def json(self, method: str, path: str, **options: Any) -> Any:
        """The decoded JSON answer of ``request``."""
        return self.request(method, path, **options).json()


def read(reader: Callable[[Any], T], data: Any) -> T:
    """``reader(data)`` (a ``memstrata.wire`` reader); an answer that does not fit raises
    ``ResponseError`` (502 ``bad_response``)."""
    try:
        return reader(data)
    except WireError as exc:
        raise ResponseError(
            f"the server's answer does not fit: {exc}",
            status=502,
            code="bad_response",
            hint="are the client and the server the same memstrata version?",
        ) from exc


def load_as(kind: type[T], data: Any) -> T:
    """``data`` (decoded JSON) as a ``kind`` record (``wire.record_from_wire``), or
    ``ResponseError``."""
    return read(functools.partial(record_from_wire, kind), data)


def json_body(fields: Mapping[str, Any]) -> bytes:
    """A JSON body of the fields that are not None (the server's defaults fill the rest)."""
    given = {name: value for name, value in fields.items() if value is not None}
    try:
        return json.dumps(given, default=_jsonable, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"cannot send as JSON: {exc}") from exc


def _jsonable(value: object) -> str:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


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
    for line in _until_done(lines):
        if line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
        elif not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []


def _until_done(lines: Iterable[str]) -> Iterator[str]:
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
