"""``Client``: ``MemoryOS``'s calls over the REST API (see the package docstring)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from memstrata.client.errors import ServerUnreachable, error_for, error_of, unreachable
from memstrata.client.wire import (
    LIST_FILTERS,
    MAX_WAIT_S,
    Health,
    When,
    context_from,
    hit_from,
    json_body,
    key_from,
    load_as,
    path_segment,
    save_stream,
    sse_events,
    time_param,
)
from memstrata.errors import MemCubeError, ValidationError
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
        return load_as(User, self._json("POST", "/users", body=body))

    def list_users(self) -> list[User]:
        """Every user (admin only)."""
        return [load_as(User, u) for u in self._json("GET", "/users")]

    def me(self) -> User:
        """The user the API key belongs to."""
        return load_as(User, self._json("GET", "/users/me"))

    def create_key(self, user_id: str = "me", *, label: str | None = None) -> ApiKey:
        """A new API key for ``user_id`` (the caller, or anyone for an admin).

        ``secret`` is the key itself, shown only here.
        """
        path = f"/users/{path_segment(user_id)}/keys"
        return key_from(self._json("POST", path, body={"label": label}))

    def list_keys(self, user_id: str = "me") -> list[ApiKey]:
        """``user_id``'s keys, revoked ones with ``revoked_at``, without their secrets."""
        return [key_from(k) for k in self._json("GET", f"/users/{path_segment(user_id)}/keys")]

    def revoke_key(self, user_id: str, key_id: str) -> None:
        """Revoke one of ``user_id``'s keys (``me``: the caller's); ``NotFoundError`` if none."""
        self._request("DELETE", f"/users/{path_segment(user_id)}/keys/{path_segment(key_id)}")

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
        return load_as(Cube, self._json("POST", "/mem_cubes", body=body))

    def list_cubes(self) -> list[Cube]:
        """The cubes the caller may read (owned or shared), oldest first."""
        return [load_as(Cube, c) for c in self._json("GET", "/mem_cubes")]

    def get_cube(self, cube_id: str) -> Cube:
        return load_as(Cube, self._json("GET", f"/mem_cubes/{path_segment(cube_id)}"))

    def delete_cube(self, cube_id: str) -> int:
        """Delete a cube and all its memory (needs admin on it); returns the item count."""
        return int(self._json("DELETE", f"/mem_cubes/{path_segment(cube_id)}")["deleted_items"])

    def grant(self, cube_id: str, user_id: str, permission: str) -> Grant:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube (needs admin on it)."""
        body = {"user_id": user_id, "permission": permission}
        return load_as(
            Grant, self._json("POST", f"/mem_cubes/{path_segment(cube_id)}/share", body=body)
        )

    def share(self, cube_id: str, user_id: str, permission: str = "read") -> Grant:
        """``grant`` under MemOS's name."""
        return self.grant(cube_id, user_id, permission)

    def revoke(self, cube_id: str, user_id: str) -> None:
        """Take away ``user_id``'s grant (needs admin); ``NotFoundError`` if they hold none."""
        self._request("DELETE", f"/mem_cubes/{path_segment(cube_id)}/share/{path_segment(user_id)}")

    def grants(self, cube_id: str) -> list[Grant]:
        """Who holds what on a cube, the owner included, oldest first (needs admin)."""
        return [
            load_as(Grant, g)
            for g in self._json("GET", f"/mem_cubes/{path_segment(cube_id)}/grants")
        ]

    def export(self, cube_id: str, path: str | os.PathLike[str]) -> Path:
        """Download cube ``cube_id`` as a MemCube ``.tar.gz`` at ``path`` (a new file; needs admin).

        Never overwrites (``MemCubeError``); a failed download leaves no file.
        """
        target = Path(path)
        if target.exists():
            raise MemCubeError(f"{target} exists", hint="export to a new file")
        response = self._request("POST", f"/mem_cubes/{path_segment(cube_id)}/export", stream=True)
        try:
            save_stream(response, target)
        except httpx.TransportError as exc:
            raise unreachable("POST", response.request.url, exc) from exc
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
        return load_as(Cube, response.json())

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
        items = self._json("GET", f"/memories/{path_segment(cube_id)}", params=params)
        return [load_as(MemoryItem, i) for i in items]

    def get(self, item_id: str, *, cube_id: str, as_of: When | None = None) -> MemoryItem:
        """The current version of an item (deleted ones too, with status ``deleted``); with
        ``as_of`` (a past time), the version current then (``NotFoundError`` if none yet)."""
        params = {} if as_of is None else {"as_of": time_param(as_of)}
        item = self._json("GET", self._item_path(cube_id, item_id), params=params)
        return load_as(MemoryItem, item)

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
        return load_as(MemoryItem, self._json("PUT", self._item_path(cube_id, item_id), body=body))

    def delete(self, item_id: str, *, cube_id: str, reason: str | None = None) -> MemoryItem:
        """Soft-delete: status ``deleted``, out of search, history kept.  Idempotent."""
        params = {} if reason is None else {"reason": reason}
        path = self._item_path(cube_id, item_id)
        return load_as(MemoryItem, self._json("DELETE", path, params=params))

    def history(self, item_id: str, *, cube_id: str) -> list[Version]:
        """Every version of an item, oldest first."""
        versions = self._json("GET", self._item_path(cube_id, item_id) + "/history")
        return [load_as(Version, v) for v in versions]

    # -- lifecycle and governance ------------------------------------------------------------

    def transition(
        self, item_id: str, to: str, *, cube_id: str, reason: str | None = None
    ) -> MemoryItem:
        """Move an item to another lifecycle state (needs write); an illegal move is a
        ``ConflictError`` whose hint names the legal ones."""
        path = self._item_path(cube_id, item_id) + "/transition"
        return load_as(MemoryItem, self._json("POST", path, body={"to": to, "reason": reason}))

    def rollback(
        self, item_id: str, version: int, *, cube_id: str, reason: str | None = None
    ) -> MemoryItem:
        """Write a new version equal to ``version`` of the item (needs write); returns it."""
        body = {"version": version, "reason": reason}
        path = self._item_path(cube_id, item_id) + "/rollback"
        return load_as(MemoryItem, self._json("POST", path, body=body))

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
            params["since"] = time_param(since)
        return [load_as(Event, e) for e in self._json("GET", "/audit", params=params)]

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
            "include": include, "as_of": None if as_of is None else time_param(as_of),
        }  # fmt: skip
        return [hit_from(h) for h in self._json("POST", "/search", body=body)["hits"]]

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
        return context_from(self._json("POST", "/context", body=body))

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
        context = None if reply["context"] is None else context_from(reply["context"])
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
        return [load_as(ProfileAttribute, a) for a in found]

    # -- running the service -----------------------------------------------------------------

    def tasks(
        self, *, cube_id: str | None = None, status: TaskStatus | None = None, limit: int = 100
    ) -> list[Task]:
        """Recent background tasks (newest first) of ``cube_id``, or of every readable cube."""
        given = {"cube_id": cube_id, "status": status, "limit": limit}
        params = {name: value for name, value in given.items() if value is not None}
        return [load_as(Task, t) for t in self._json("GET", "/tasks", params=params)]

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

    def _json(self, method: str, path: str, **options: Any) -> Any:
        return self._request(method, path, **options).json()

    @staticmethod
    def _item_path(cube_id: str, item_id: str) -> str:
        return f"/memories/{path_segment(cube_id)}/{path_segment(item_id)}"

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
            for name, data in sse_events(response.iter_lines()):
                if name == "delta":
                    yield str(data["text"])
                elif name == "error":
                    detail = data["error"]
                    raise error_for(502, detail["code"], detail["message"], detail.get("hint"))
                elif name == "done":
                    return
        except httpx.TransportError as exc:
            raise unreachable("POST", response.request.url, exc) from exc
        finally:  # at the end, on an error, or when the caller closes the iterator early
            response.close()
        raise ServerUnreachable("the answer stream ended before its done event")
