"""``Client``'s calls on memory items and their lifecycle (``/memories…``, ``/erase``, ``/audit``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memstrata.client.transport import (
    Exchange,
    Requests,
    When,
    load_as,
    path_segment,
    read,
    time_param,
)
from memstrata.errors import ValidationError
from memstrata.model import Event, FeedbackResult, MemoryItem, Version
from memstrata.wire import item_from_wire, record_from_wire, version_from_wire

#: The filters ``GET /memories/{cube_id}`` lists by (query parameters; ``metadata`` a mapping,
#: sent as one JSON object).
LIST_FILTERS = ("session_id", "tier", "type", "status", "metadata")


class Items:
    """Add, list, read, change and erase items as exchanges (``client.transport``)."""

    def __init__(self) -> None:
        self._http = Requests()

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        cube_id: str,
        session_id: str | None = None,
        expires_at: When | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Exchange[list[str]]:
        """Store chat messages (or one string) as turns; their ids in order (``MemoryOS.add``;
        ``expires_at``: when they stop existing).  OpenAI-format tool calls and results, content
        parts and ``tools`` definitions are stored as tool schemas, calls, images and documents
        (then the ids are of every item written)."""
        body: dict[str, Any] = {"cube_id": cube_id, "messages": messages, "session_id": session_id}
        if expires_at is not None:
            body["expires_at"] = time_param(expires_at)
        if tools is not None:
            body["tools"] = list(tools)
        return list((yield from self._http.json("POST", "/memories", body=body))["ids"])

    def add_document(
        self,
        data: bytes | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        cube_id: str,
        session_id: str | None = None,
    ) -> Exchange[list[str]]:
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
        response = yield from self._http.send("POST", "/memories", data=fields, files=files)
        return list(response.json()["ids"])

    def list_memories(
        self,
        cube_id: str,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Exchange[list[MemoryItem]]:
        """A page of a cube's items, oldest event first, filtered by ``LIST_FILTERS`` (a value
        or a list of values each; ``metadata`` a mapping of keys to the values they must
        equal, as in ``search``); without ``status``, live items only."""
        unknown = sorted(set(filters or {}) - set(LIST_FILTERS))
        if unknown:
            raise ValidationError(
                f"cannot list by {', '.join(unknown)}",
                hint=f"the API lists by {', '.join(LIST_FILTERS)}; search takes other filters",
            )
        params: list[tuple[str, str | int]] = [("limit", limit), ("offset", offset)]
        for name, value in (filters or {}).items():
            if name == "metadata":
                params.append((name, json.dumps(dict(value))))
                continue
            values = [value] if isinstance(value, str) else value
            params.extend((name, v) for v in values)
        items = yield from self._http.json(
            "GET", f"/memories/{path_segment(cube_id)}", params=params
        )
        return [read(item_from_wire, i) for i in items]

    def get(self, item_id: str, *, cube_id: str, as_of: When | None = None) -> Exchange[MemoryItem]:
        """The current version of an item (deleted ones too, with status ``deleted``); with
        ``as_of`` (a past time), the version current then (``NotFoundError`` if none yet)."""
        params = {} if as_of is None else {"as_of": time_param(as_of)}
        return (yield from self._item("GET", _item_path(cube_id, item_id), params=params))

    def update(
        self,
        item_id: str,
        *,
        cube_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
        expires_at: When | None = None,
    ) -> Exchange[MemoryItem]:
        """Write a new version with new ``text``, ``metadata`` and/or ``expires_at`` (a time, or
        ``"never"`` to remove it); returns it."""
        body: dict[str, Any] = {"text": text, "metadata": metadata, "reason": reason}
        if expires_at is not None:
            body["expires_at"] = "never" if expires_at == "never" else time_param(expires_at)
        return (yield from self._item("PUT", _item_path(cube_id, item_id), body=body))

    def feedback(
        self,
        text: str,
        *,
        cube_id: str,
        item_ids: Sequence[str] | None = None,
        corrected: str | None = None,
    ) -> Exchange[FeedbackResult]:
        """A correction, rejection, request to forget or confirmation, read and applied to
        ``item_ids`` or the memories the text is about (``MemoryOS.feedback``)."""
        body = {
            "cube_id": cube_id, "text": text, "corrected": corrected,
            "item_ids": None if item_ids is None else list(item_ids),
        }  # fmt: skip
        return record_from_wire(
            FeedbackResult, (yield from self._http.json("POST", "/feedback", body=body))
        )

    def expire(self, *, cube_id: str | None = None) -> Exchange[int]:
        """Erase the memories of ``cube_id`` (every cube, for an administrator) whose expiry has
        passed, now; how many went (``MemoryOS.expire``)."""
        return int(
            (yield from self._http.json("POST", "/expire", body={"cube_id": cube_id}))["erased"]
        )

    def delete(
        self, item_id: str, *, cube_id: str, reason: str | None = None
    ) -> Exchange[MemoryItem]:
        """Soft-delete: status ``deleted``, out of search, history kept.  Idempotent."""
        params = {} if reason is None else {"reason": reason}
        return (yield from self._item("DELETE", _item_path(cube_id, item_id), params=params))

    def history(self, item_id: str, *, cube_id: str) -> Exchange[list[Version]]:
        """Every version of an item, oldest first."""
        versions = yield from self._http.json("GET", _item_path(cube_id, item_id) + "/history")
        return [read(version_from_wire, v) for v in versions]

    def transition(
        self, item_id: str, to: str, *, cube_id: str, reason: str | None = None
    ) -> Exchange[MemoryItem]:
        """Move an item to another lifecycle state (needs write); an illegal move is a
        ``ConflictError`` whose hint names the legal ones."""
        path = _item_path(cube_id, item_id) + "/transition"
        return (yield from self._item("POST", path, body={"to": to, "reason": reason}))

    def rollback(
        self, item_id: str, version: int, *, cube_id: str, reason: str | None = None
    ) -> Exchange[MemoryItem]:
        """Write a new version equal to ``version`` of the item (needs write); returns it."""
        path = _item_path(cube_id, item_id) + "/rollback"
        return (yield from self._item("POST", path, body={"version": version, "reason": reason}))

    def erase(
        self,
        item_id: str | None = None,
        *,
        session_id: str | None = None,
        cube_id: str | None = None,
        subject_user_id: str | None = None,
        reason: str | None = None,
    ) -> Exchange[int]:
        """Erase for good: an item, a session of ``cube_id``, a whole cube, or everything
        ``subject_user_id`` added; returns how many items went (derived ones included).

        A subject's data may be erased by that user, in the cubes they may write (``write`` or
        ``admin``), or by an administrator, in every cube; ``cube_id`` narrows it to one."""
        body = {
            "item_id": item_id, "session_id": session_id, "cube_id": cube_id,
            "subject_user_id": subject_user_id, "reason": reason,
        }  # fmt: skip
        return int((yield from self._http.json("POST", "/erase", body=body))["erased"])

    def audit(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: When | None = None,
        limit: int = 1000,
    ) -> Exchange[list[Event]]:
        """The audit trail, oldest first: every event for an administrator, a cube's (give
        ``cube_id`` or ``item_id``) for that cube's admins."""
        given = {"cube_id": cube_id, "item_id": item_id, "limit": limit}
        params = {name: value for name, value in given.items() if value is not None}
        if since is not None:
            params["since"] = time_param(since)
        return [
            load_as(Event, e) for e in (yield from self._http.json("GET", "/audit", params=params))
        ]

    def end_task(
        self,
        *,
        cube_id: str,
        session_id: str,
        outcome: str = "success",
        goal: str | None = None,
        skill_ids: Sequence[str] | None = None,
    ) -> Exchange[list[MemoryItem]]:
        """Say how the task of ``session_id`` ended: ``success`` distils a skill from its tool
        calls, ``failure`` demotes the skills it followed; returns the skills written
        (``MemoryOS.end_task``)."""
        body = {
            "cube_id": cube_id, "outcome": outcome, "goal": goal,
            "skill_ids": None if skill_ids is None else list(skill_ids),
        }  # fmt: skip
        path = f"/sessions/{path_segment(session_id)}/end"
        answer = yield from self._http.json("POST", path, body=body)
        return [read(item_from_wire, s) for s in answer["skills"]]

    def get_image(self, item_id: str, *, cube_id: str) -> Exchange[tuple[str, bytes]]:
        """The media type and bytes of an image a message sent (``MemoryOS.get_image``);
        ``NotFoundError`` for an image kept only as an address (never downloaded)."""
        response = yield from self._http.send("GET", _item_path(cube_id, item_id) + "/image")
        media = response.headers.get("content-type", "").split(";")[0].strip()
        return media, response.content

    def _item(self, method: str, path: str, **options: Any) -> Exchange[MemoryItem]:
        return read(item_from_wire, (yield from self._http.json(method, path, **options)))


def _item_path(cube_id: str, item_id: str) -> str:
    return f"/memories/{path_segment(cube_id)}/{path_segment(item_id)}"
