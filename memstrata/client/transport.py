"""The HTTP under both clients, written once: each call is an *exchange*, sent by either transport.

A call of ``Client`` and ``AsyncClient`` is written once, in its part (``client.items``…), as a
generator (an ``Exchange``): it yields each ``Request`` it needs (``Requests.json``,
``Requests.send``) and is sent back the response, then returns the call's result.  It does no
I/O of its own, so the same code runs over ``Transport`` (``httpx.Client``) and
``AsyncTransport`` (``httpx.AsyncClient``), the one base, two transports pattern of httpx.
``BaseTransport`` builds every request and maps every error once: an error response becomes the
exception its ``code`` names (``errors.error_of``), a connection that fails
``ServerUnreachable``.  Answers are read back into the core's types by ``memstrata.wire``; one
that does not fit is a ``ResponseError`` (``bad_response``), never a value filled in with a
default.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from memstrata.client.errors import ResponseError, error_of, unreachable
from memstrata.errors import ValidationError
from memstrata.wire import WireError, record_from_wire

T = TypeVar("T")
HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
#: A time as the API takes it: a datetime, an ISO 8601 string, or epoch seconds.
When = datetime | str | float


@dataclass(frozen=True)
class Request:
    """One request of an exchange; its response is sent back (an error response raises).

    ``body`` is sent as JSON (its None fields left out); ``timeout`` is added to the client's;
    a ``stream`` response is left open (the exchange closes it, or hands it on).
    """

    method: str
    path: str
    body: Mapping[str, Any] | None = None
    timeout: float = 0.0
    stream: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)  # params, data, files


@dataclass(frozen=True)
class Save:
    """A step of an exchange: write the open streamed ``response``'s body to the new file
    ``target``; nothing is left there on failure.  Sent back None; the response is closed."""

    response: httpx.Response
    target: Path


#: A call's exchange with the server: yields ``Request`` and ``Save`` steps, is sent each
#: step's answer, returns the call's result.
Exchange = Generator[Request | Save, Any, T]


class Requests:
    """The steps the parts yield from (``yield from self._http.json(...)``)."""

    def send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        timeout: float = 0.0,
        stream: bool = False,
        **options: Any,
    ) -> Exchange[httpx.Response]:
        """One request; its (successful) response."""
        response: httpx.Response = yield Request(method, path, body, timeout, stream, options)
        return response

    def json(self, method: str, path: str, **options: Any) -> Exchange[Any]:
        """One request; its decoded JSON answer."""
        response = yield from self.send(method, path, **options)
        return response.json()


class BaseTransport(Generic[HttpT]):
    """What both transports share: the ``httpx`` client for ``base_url`` as the user of
    ``api_key``, how a ``Request`` is built, how an error response is raised.

    ``timeout`` is in seconds, per request; a ``Request`` may add to it.
    """

    def __init__(self, http: type[HttpT], base_url: str, api_key: str | None, timeout: float):
        headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        self.timeout = timeout
        self._http: HttpT = http(base_url=base_url, headers=headers, timeout=timeout)

    def build(self, step: Request) -> httpx.Request:
        """The ``httpx.Request`` of ``step``: its JSON body, its timeout."""
        options = dict(step.options)
        if step.body is not None:
            options["content"] = json_body(step.body)
            options["headers"] = {"Content-Type": "application/json"}
        return self._http.build_request(
            step.method, step.path, timeout=self.timeout + step.timeout, **options
        )

    @staticmethod
    def failed(request: httpx.Request, exc: httpx.TransportError) -> Exception:
        """What a request that got no answer raises: ``ServerUnreachable``."""
        return unreachable(request.method, request.url, exc)

    @staticmethod
    def refused(response: httpx.Response) -> Exception:
        """What an error response (its body read) raises: its code's class."""
        return error_of(response)


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


class ServerEvents:
    """Server-sent events, read line by line: ``feed`` gives the (name, decoded JSON data) of the
    event a line ends, or None."""

    def __init__(self) -> None:
        self._name, self._data = "message", list[str]()

    def feed(self, line: str) -> tuple[str, Any] | None:
        """Take one line (without its end); a blank one ends the event."""
        if line.startswith("event:"):
            self._name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            self._data.append(line[len("data:") :].removeprefix(" "))
        elif not line:
            event = (self._name, json.loads("\n".join(self._data))) if self._data else None
            self._name, self._data = "message", []
            return event
        return None
