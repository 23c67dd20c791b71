"""A Python client for the REST API (docs/rest.md): ``MemoryOS``'s calls, over HTTP.

::

    from memstrata.client import Client

    with Client("http://127.0.0.1:8765", api_key) as memory:
        memory.add([{"role": "user", "content": "I moved to Porto."}], cube_id="notes")
        for hit in memory.search("Where do I live?"):
            print(hit.score, hit.item.text)

Methods have ``MemoryOS``'s names and keyword arguments, less the acting user: the API key says
who calls, so ``user_id=`` appears only where the SDK acts on another user (keys, sharing), and
``me`` there means the caller.  The lifecycle and governance calls are here too (``transition``,
``rollback``, ``as_of`` on ``get`` and ``search``, ``audit``, ``erase``, ``revoke``, ``grants``),
and MemCube ``export``/``import_cube`` to and from a local ``.tar.gz``.  A time (``When``) is a
datetime, an ISO 8601 string or epoch seconds; a naive one is UTC.

Results are the core's dataclasses (``User``, ``Cube``, ``MemoryItem``, ``Version``, ``Hit``,
``Context``, ``ChatReply``, ``Task``, ``Event``…).  A search hit's item carries the fields the API
shows for hits (id, cube_id, text, type, tier, event_time, session_id, speaker, sources); its
other fields are the dataclass defaults (``get`` fetches the whole item).  ``MemoryOS.stats`` has
no JSON endpoint: ``metrics`` returns the Prometheus text, which holds the same counts.

Errors, the ``memstrata.errors`` tree plus two leaves for what only a client meets::

    MemstrataError
    ├── ValidationError, Unauthenticated, NotFoundError, PermissionDenied, ConflictError, …
    │                          an error response, by its ``code``: the class raised in process
    ├── ResponseError          an error response with a code no class has (405, 413, 415, a 500
    │                          bug, a proxy's page); ``status`` and ``code`` as received
    └── ServerUnreachable (503) no answer: connection refused or broken, or the timeout passed

Each carries the server's ``message`` and ``hint``.  The fields a subclass sets in process
(``PermissionDenied.user_id``…) are not in a response and are not set.  Bad arguments found
before sending (a filter the API cannot list by, a value JSON cannot carry) are a
``ValidationError`` too.

Thread safety: one ``Client`` may be shared by threads; each call is one request on the pool of
its ``httpx.Client``, which is thread-safe (``wait`` without a timeout may make several).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, TypeVar
from urllib.parse import quote

import httpx
import pydantic

from memstrata.errors import MemCubeError, MemstrataError, ValidationError
from memstrata.model import (
    ApiKey,
    Cube,
    Event,
    Grant,
    Hit,
    MemoryItem,
    ProfileAttribute,
    User,
    Version,
)
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply
from memstrata.scheduler import Task, TaskStatus

__all__ = ["Client", "Health", "ResponseError", "ServerUnreachable", "When"]

T = TypeVar("T")
#: A time as the API takes it: a datetime, an ISO 8601 string, or epoch seconds.
When = datetime | str | float

#: The longest ``/tasks/wait`` the server holds a request for, in seconds.
MAX_WAIT_S = 60.0
#: The filters ``GET /memories/{cube_id}`` lists by (query parameters).
LIST_FILTERS = ("session_id", "tier", "type", "status")


class ResponseError(MemstrataError):
    """An error response whose ``code`` has no class in ``memstrata.errors``."""

    def __init__(self, message: str, *, status: int, code: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code


class ServerUnreachable(MemstrataError):
    """The server did not answer: refused or broken connection, or no answer within the timeout."""

    status = 503
    code = "unreachable"


#: An error ``code`` → the class raised in process: the first level of ``memstrata.errors``.
_BY_CODE: dict[str, type[MemstrataError]] = {
    cls.code: cls for cls in MemstrataError.__subclasses__() if cls.__module__ == "memstrata.errors"
}


def _error(status: int, code: str, message: str, hint: str | None) -> MemstrataError:
    """The exception for an error response: its code's class, else ``ResponseError``."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return ResponseError(message, status=status, code=code, hint=hint)
    # Subclasses such as PermissionDenied build their message from fields a response does not
    # carry, so the instance is made without their __init__ (as errors.AdminRequired does).
    error = cls.__new__(cls)
    MemstrataError.__init__(error, message, hint=hint)
    return error


def _error_of(response: httpx.Response) -> MemstrataError:
    """The exception for a 4xx/5xx response, in the API's shape or not (a proxy's page)."""
    try:
        detail = response.json()["error"]
        return _error(response.status_code, detail["code"], detail["message"], detail.get("hint"))
    except (ValueError, KeyError, TypeError):
        text = " ".join(response.text.split())[:200]
        return ResponseError(
            f"HTTP {response.status_code} {response.reason_phrase}: {text}",
            status=response.status_code,
            code=f"http_{response.status_code}",
        )


class Health(TypedDict):
    status: str
    version: str


#: One pydantic adapter per result type (building one is slow; using one is thread-safe).
_ADAPTERS: dict[type[Any], pydantic.TypeAdapter[Any]] = {}


def _load(kind: type[T], data: Any) -> T:
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


def _hit(data: dict[str, Any]) -> Hit:
    shown = {name: value for name, value in data.items() if name != "score"}
    return Hit(item=_load(MemoryItem, shown), score=float(data["score"]))


def _context(data: dict[str, Any]) -> Context:
    """``items`` is the recent turns, then the hits' items: the recent turns come first."""
    hits = [_hit(h) for h in data["hits"]]
    items = [_load(MemoryItem, i) for i in data["items"]]
    return Context(
        text=data["text"],
        tokens=data["tokens"],
        budget=data["budget"],
        hits=hits,
        recent=items[: len(items) - len(hits)],
        profile=list(data["profile"]),
    )


def _key(data: dict[str, Any]) -> ApiKey:
    """A key record; a new key's ``key`` is its ``secret``."""
    record = {k: v for k, v in data.items() if k != "key"}
    return replace(_load(ApiKey, record), secret=data.get("key"))


def _jsonable(value: object) -> str:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _body(fields: Mapping[str, Any]) -> bytes:
    """A JSON body of the fields that are not None (the server's defaults fill the rest)."""
    given = {name: value for name, value in fields.items() if value is not None}
    try:
        return json.dumps(given, default=_jsonable, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"cannot send as JSON: {exc}") from exc


def _time(value: When) -> str:
    """A time for a query or body: ISO 8601 (naive means UTC, as the server reads it) or epoch
    seconds."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _segment(value: str) -> str:
    """An id as one path segment (a '/' or '?' in it cannot change the path)."""
    return quote(str(value), safe="")


def _events(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """Server-sent events as (event name, decoded JSON data) pairs."""
    name, data = "message", []
    for line in _ended(lines):
        if line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
        elif not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []


def _ended(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` and a blank line (which ends an event the stream left open)."""
    yield from lines
    yield ""


class Client:
    """The REST API at ``base_url`` as the user of ``api_key`` (see the module docstring).

    ``timeout`` is in seconds, per request (``wait`` adds the time it asks the server to wait;
    a chat with a slow model may need more).  Close it (or use ``with``) to release its
    connections.
    """

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 30.0) -> None:
        headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        self.timeout = timeout
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- users and keys ----------------------------------------------------------------------

    def create_user(self, user_id: str, name: str | None = None, role: str = "user") -> User:
        """Create a user (admin only); ``ConflictError`` if the id is taken."""
        body = {"user_id": user_id, "name": name, "role": role}
        return _load(User, self._json("POST", "/users", body=body))

    def list_users(self) -> list[User]:
        """Every user (admin only)."""
        return [_load(User, u) for u in self._json("GET", "/users")]

    def me(self) -> User:
        """The user the API key belongs to."""
        return _load(User, self._json("GET", "/users/me"))

    def create_key(self, user_id: str = "me", *, label: str | None = None) -> ApiKey:
        """A new API key for ``user_id`` (the caller, or anyone for an admin).

        ``secret`` is the key itself, shown only here.
        """
        path = f"/users/{_segment(user_id)}/keys"
        return _key(self._json("POST", path, body={"label": label}))

    def list_keys(self, user_id: str = "me") -> list[ApiKey]:
        """``user_id``'s keys, revoked ones with ``revoked_at``, without their secrets."""
        return [_key(k) for k in self._json("GET", f"/users/{_segment(user_id)}/keys")]

    def revoke_key(self, user_id: str, key_id: str) -> None:
        """Revoke one of ``user_id``'s keys (``me``: the caller's); ``NotFoundError`` if none."""
        self._request("DELETE", f"/users/{_segment(user_id)}/keys/{_segment(key_id)}")

    # -- cubes and grants --------------------------------------------------------------------

    def create_cube(
        self,
        name: str,
        *,
        cube_id: str | None = None,
        kind: str = "user",
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """Create a cube owned by the caller (tier ``settings``: defaults fill the rest)."""
        body = {"name": name, "cube_id": cube_id, "kind": kind, "settings": settings}
        return _load(Cube, self._json("POST", "/mem_cubes", body=body))

    def list_cubes(self) -> list[Cube]:
        """The cubes the caller may read (owned or shared), oldest first."""
        return [_load(Cube, c) for c in self._json("GET", "/mem_cubes")]

    def get_cube(self, cube_id: str) -> Cube:
        return _load(Cube, self._json("GET", f"/mem_cubes/{_segment(cube_id)}"))

    def delete_cube(self, cube_id: str) -> int:
        """Delete a cube and all its memory (needs admin on it); returns the item count."""
        return int(self._json("DELETE", f"/mem_cubes/{_segment(cube_id)}")["deleted_items"])

    def grant(self, cube_id: str, user_id: str, permission: str) -> Grant:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube (needs admin on it)."""
        body = {"user_id": user_id, "permission": permission}
        return _load(Grant, self._json("POST", f"/mem_cubes/{_segment(cube_id)}/share", body=body))

    def share(self, cube_id: str, user_id: str, permission: str = "read") -> Grant:
        """``grant`` under MemOS's name."""
        return self.grant(cube_id, user_id, permission)

    def revoke(self, cube_id: str, user_id: str) -> None:
        """Take away ``user_id``'s grant (needs admin); ``NotFoundError`` if they hold none."""
        self._request("DELETE", f"/mem_cubes/{_segment(cube_id)}/share/{_segment(user_id)}")

    def grants(self, cube_id: str) -> list[Grant]:
        """Who holds what on a cube, the owner included, oldest first (needs admin)."""
        return [
            _load(Grant, g) for g in self._json("GET", f"/mem_cubes/{_segment(cube_id)}/grants")
        ]

    def export(self, cube_id: str, path: str | os.PathLike[str]) -> Path:
        """Download cube ``cube_id`` as a MemCube ``.tar.gz`` at ``path`` (a new file; needs admin).

        Never overwrites (``MemCubeError``); a failed download leaves no file.
        """
        target = Path(path)
        if target.exists():
            raise MemCubeError(f"{target} exists", hint="export to a new file")
        response = self._request("POST", f"/mem_cubes/{_segment(cube_id)}/export", stream=True)
        try:
            _save(response, target)
        except httpx.TransportError as exc:
            raise _unreachable("POST", response.request.url, exc) from exc
        finally:
            response.close()
        return target

    def import_cube(
        self,
        path: str | os.PathLike[str],
        *,
        cube_id: str | None = None,
        keep_ids: bool = True,
        reembed: bool = False,
    ) -> Cube:
        """Upload the MemCube ``.tar.gz`` at ``path`` as a new cube owned by the caller; all or
        nothing.  ``keep_ids=False`` gives every item a new id (a copy beside the original);
        ``reembed`` recomputes the vectors (needed when the archive has another embedder).
        """
        fields = {"remap_ids": str(not keep_ids).lower(), "reembed": str(reembed).lower()}
        if cube_id is not None:
            fields["cube_id"] = cube_id
        with Path(path).open("rb") as archive:
            files = {"file": (Path(path).name, archive, "application/gzip")}
            response = self._request("POST", "/mem_cubes/import", data=fields, files=files)
        return _load(Cube, response.json())

    # -- items -------------------------------------------------------------------------------

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        cube_id: str,
        session_id: str | None = None,
    ) -> list[str]:
        """Store chat messages (or one string) as turns; their ids in order (``MemoryOS.add``)."""
        body = {"cube_id": cube_id, "messages": messages, "session_id": session_id}
        return list(self._json("POST", "/memories", body=body)["ids"])

    def add_document(
        self,
        data: bytes | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        cube_id: str,
        session_id: str | None = None,
    ) -> list[str]:
        """Upload a document (.txt .md .json .pdf) as ``data`` bytes named ``filename``, or the
        file at ``path`` (``filename`` defaults to its name); returns the chunk ids in order.
        """
        if (data is None) == (path is None):
            raise ValidationError("give either data or path, not both or neither")
        if path is not None:
            data, filename = Path(path).read_bytes(), filename or Path(path).name
        if not filename:
            raise ValidationError("a document given as data needs its filename")
        fields = {"cube_id": cube_id} | ({"session_id": session_id} if session_id else {})
        files = {"file": (filename, data or b"")}
        response = self._request("POST", "/memories", data=fields, files=files)
        return list(response.json()["ids"])

    def list_memories(
        self,
        cube_id: str,
        *,
        filters: Mapping[str, str | Sequence[str]] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """A page of a cube's items, oldest event first, filtered by ``LIST_FILTERS``
        (a value or a list of values each); without ``status``, live items only."""
        unknown = sorted(set(filters or {}) - set(LIST_FILTERS))
        if unknown:
            raise ValidationError(
                f"cannot list by {', '.join(unknown)}",
                hint=f"the API lists by {', '.join(LIST_FILTERS)}; search takes other filters",
            )
        params: list[tuple[str, str | int]] = [("limit", limit), ("offset", offset)]
        for name, value in (filters or {}).items():
            values = [value] if isinstance(value, str) else value
            params.extend((name, v) for v in values)
        items = self._json("GET", f"/memories/{_segment(cube_id)}", params=params)
        return [_load(MemoryItem, i) for i in items]

    def get(self, item_id: str, *, cube_id: str, as_of: When | None = None) -> MemoryItem:
        """The current version of an item (deleted ones too, with status ``deleted``); with
        ``as_of`` (a past time), the version current then (``NotFoundError`` if none yet)."""
        params = {} if as_of is None else {"as_of": _time(as_of)}
        item = self._json("GET", self._item_path(cube_id, item_id), params=params)
        return _load(MemoryItem, item)

    def update(
        self,
        item_id: str,
        *,
        cube_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> MemoryItem:
        """Write a new version with new ``text`` and/or ``metadata``; returns it."""
        body = {"text": text, "metadata": metadata, "reason": reason}
        return _load(MemoryItem, self._json("PUT", self._item_path(cube_id, item_id), body=body))

    def delete(self, item_id: str, *, cube_id: str, reason: str | None = None) -> MemoryItem:
        """Soft-delete: status ``deleted``, out of search, history kept.  Idempotent."""
        params = {} if reason is None else {"reason": reason}
        path = self._item_path(cube_id, item_id)
        return _load(MemoryItem, self._json("DELETE", path, params=params))

    def history(self, item_id: str, *, cube_id: str) -> list[Version]:
        """Every version of an item, oldest first."""
        versions = self._json("GET", self._item_path(cube_id, item_id) + "/history")
        return [_load(Version, v) for v in versions]

    # -- lifecycle and governance ------------------------------------------------------------

    def transition(
        self, item_id: str, to: str, *, cube_id: str, reason: str | None = None
    ) -> MemoryItem:
        """Move an item to another lifecycle state (needs write); an illegal move is a
        ``ConflictError`` whose hint names the legal ones."""
        path = self._item_path(cube_id, item_id) + "/transition"
        return _load(MemoryItem, self._json("POST", path, body={"to": to, "reason": reason}))

    def rollback(
        self, item_id: str, version: int, *, cube_id: str, reason: str | None = None
    ) -> MemoryItem:
        """Write a new version equal to ``version`` of the item (needs write); returns it."""
        body = {"version": version, "reason": reason}
        path = self._item_path(cube_id, item_id) + "/rollback"
        return _load(MemoryItem, self._json("POST", path, body=body))

    def erase(
        self,
        item_id: str | None = None,
        *,
        session_id: str | None = None,
        cube_id: str | None = None,
        subject_user_id: str | None = None,
        reason: str | None = None,
    ) -> int:
        """Erase for good: an item, a session of ``cube_id``, a whole cube, or everything
        ``subject_user_id`` added; returns how many items went (derived ones included)."""
        body = {
            "item_id": item_id, "session_id": session_id, "cube_id": cube_id,
            "subject_user_id": subject_user_id, "reason": reason,
        }  # fmt: skip
        return int(self._json("POST", "/erase", body=body)["erased"])

    def audit(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: When | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        """The audit trail, oldest first: every event for an administrator, a cube's (give
        ``cube_id`` or ``item_id``) for that cube's admins."""
        given = {"cube_id": cube_id, "item_id": item_id, "limit": limit}
        params = {name: value for name, value in given.items() if value is not None}
        if since is not None:
            params["since"] = _time(since)
        return [_load(Event, e) for e in self._json("GET", "/audit", params=params)]

    # -- reading memory ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        cube_ids: Sequence[str] | None = None,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        include: Sequence[str] | None = None,
        as_of: When | None = None,
    ) -> list[Hit]:
        """Hybrid search over ``cube_ids`` (default: every cube the caller may read), best first.

        ``include`` adds ``merged``, ``archived`` or ``frozen`` items; with ``as_of`` (a past
        time) the search answers as the memory stood then.
        """
        body = {
            "query": query, "cube_ids": cube_ids, "top_k": top_k, "filters": filters,
            "include": include, "as_of": None if as_of is None else _time(as_of),
        }  # fmt: skip
        return [_hit(h) for h in self._json("POST", "/search", body=body)["hits"]]

    def context(
        self,
        query: str,
        *,
        budget_tokens: int = 1000,
        cube_ids: Sequence[str] | None = None,
        session_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        expand_sources: bool = True,
        chain: bool = True,
    ) -> Context:
        """The memories for ``query`` packed into ``budget_tokens`` (``MemoryOS.context``)."""
        body = {
            "query": query, "budget_tokens": budget_tokens, "cube_ids": cube_ids,
            "session_id": session_id, "filters": filters, "expand_sources": expand_sources,
            "chain": chain,
        }  # fmt: skip
        return _context(self._json("POST", "/context", body=body))

    def chat(
        self,
        query: str,
        *,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> ChatReply:
        """Answer from memory with the server's chat model; the exchange is stored in ``cube_id``.

        ``LLMNotConfigured`` without a chat model, ``LLMError`` when it fails.
        """
        body = self._chat_body(query, cube_id, session_id, budget_tokens, max_tokens)
        reply = self._json("POST", "/chat", body=body)
        context = None if reply["context"] is None else _context(reply["context"])
        return ChatReply(answer=reply["answer"], ids=list(reply["ids"]), context=context)

    def chat_stream(
        self,
        query: str,
        *,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> Iterator[str]:
        """``chat`` as the answer's pieces, as the model writes them (server-sent events).

        The request is sent, and its errors raised, here; a failure later in the stream is
        raised by the iterator.  The server stores the exchange after the last piece: read the
        iterator to its end (or close it, to stop early and store nothing).
        """
        body = self._chat_body(query, cube_id, session_id, budget_tokens, max_tokens)
        response = self._request("POST", "/chat/stream", body=body, stream=True)
        return self._pieces(response)

    def get_profile(self, *, cube_id: str | None = None) -> list[ProfileAttribute]:
        """The caller's current profile attributes in ``cube_id`` (or every readable cube)."""
        params = {} if cube_id is None else {"cube_id": cube_id}
        found = self._json("GET", "/users/me/profile", params=params)
        return [_load(ProfileAttribute, a) for a in found]

    # -- running the service -----------------------------------------------------------------

    def tasks(
        self, *, cube_id: str | None = None, status: TaskStatus | None = None, limit: int = 100
    ) -> list[Task]:
        """Recent background tasks (newest first) of ``cube_id``, or of every readable cube."""
        given = {"cube_id": cube_id, "status": status, "limit": limit}
        params = {name: value for name, value in given.items() if value is not None}
        return [_load(Task, t) for t in self._json("GET", "/tasks", params=params)]

    def wait(self, cube_id: str | None = None, timeout: float | None = None) -> bool:
        """Block until ``cube_id`` (default: every cube the caller may read) has no outstanding
        task; False when ``timeout`` seconds pass first (None: no limit).  The server holds one
        request at most ``MAX_WAIT_S``, so a longer wait is several requests.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT_S if deadline is None else max(0.0, deadline - time.monotonic())
            ask = min(MAX_WAIT_S, left)
            body = {"cube_id": cube_id, "timeout_s": ask}
            done = bool(self._json("POST", "/tasks/wait", body=body, timeout=ask)["done"])
            if done or (deadline is not None and time.monotonic() >= deadline):
                return done

    def configure(self, **changes: int | float) -> dict[str, int | float]:
        """Change runtime search settings (admin only); returns every runtime setting."""
        return dict(self._json("POST", "/configure", body=changes))

    def metrics(self) -> str:
        """The server's Prometheus metrics (requests, latency; items and tasks of your cubes)."""
        return self._request("GET", "/metrics").text

    def health(self) -> Health:
        """``{"status": "ok", "version"}`` (needs no key)."""
        found = self._json("GET", "/health")
        return Health(status=found["status"], version=found["version"])

    # -- HTTP --------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        timeout: float = 0.0,
        stream: bool = False,
        **options: Any,
    ) -> httpx.Response:
        """Send one request; an error response or no answer raises (see the module docstring).

        ``timeout`` is added to the client's; a ``stream`` response is left open on success.
        """
        if body is not None:
            options["content"] = _body(body)
            options["headers"] = {"Content-Type": "application/json"}
        request = self._http.build_request(method, path, timeout=self.timeout + timeout, **options)
        try:
            response = self._http.send(request, stream=stream)
            if response.is_error and stream:
                response.read()
        except httpx.TransportError as exc:
            raise _unreachable(method, request.url, exc) from exc
        if response.is_error:
            response.close()
            raise _error_of(response)
        return response

    def _json(self, method: str, path: str, **options: Any) -> Any:
        return self._request(method, path, **options).json()

    @staticmethod
    def _item_path(cube_id: str, item_id: str) -> str:
        return f"/memories/{_segment(cube_id)}/{_segment(item_id)}"

    @staticmethod
    def _chat_body(
        query: str, cube_id: str, session_id: str | None, budget_tokens: int, max_tokens: int
    ) -> dict[str, Any]:
        return {
            "query": query, "cube_id": cube_id, "session_id": session_id,
            "budget_tokens": budget_tokens, "max_tokens": max_tokens,
        }  # fmt: skip

    @staticmethod
    def _pieces(response: httpx.Response) -> Iterator[str]:
        """The ``delta`` texts of a ``/chat/stream`` response; an ``error`` event raises."""
        try:
            for name, data in _events(response.iter_lines()):
                if name == "delta":
                    yield str(data["text"])
                elif name == "error":
                    detail = data["error"]
                    raise _error(502, detail["code"], detail["message"], detail.get("hint"))
                elif name == "done":
                    return
        except httpx.TransportError as exc:
            raise _unreachable("POST", response.request.url, exc) from exc
        finally:  # at the end, on an error, or when the caller closes the iterator early
            response.close()
        raise ServerUnreachable("the answer stream ended before its done event")


def _save(response: httpx.Response, target: Path) -> None:
    """Write a streamed response's body to the new file ``target``; nothing is left on failure."""
    archive = target.open("xb")  # FileExistsError if it appeared meanwhile: not ours to remove
    try:
        with archive:
            for piece in response.iter_bytes():
                archive.write(piece)
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def _unreachable(method: str, url: httpx.URL, exc: httpx.TransportError) -> ServerUnreachable:
    what = "did not answer in time" if isinstance(exc, httpx.TimeoutException) else "failed"
    return ServerUnreachable(
        f"{method} {url} {what} ({type(exc).__name__}: {exc})",
        hint="is the server running (memstrata serve), and is the URL right?",
    )
