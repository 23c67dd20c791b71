"""Validate ``add()`` input: a plain string, or a list of chat messages.

A message is a mapping with ``content`` (a non-empty string) and optionally ``role`` (default
``"user"``), ``name`` (the speaker), ``timestamp`` (ISO 8601, epoch seconds or datetime; when it
happened), ``id`` (the caller's own id, stored as ``external_id``), ``metadata`` (a JSON
object) and ``expires_at`` (a time as ``timestamp``; when the memory stops existing).  In the
OpenAI chat format, ``content`` may also be a list of parts (text, images, files), an assistant
message may carry ``tool_calls`` (its content may then be empty) and a ``role: "tool"`` message
holds a call's result for its ``tool_call_id`` (at most ``MAX_TOOL_RESULT_CHARS``; it is
summarised, never stored whole); ``reader.parts`` reads those.  Anything else is a
``ValidationError`` raised before anything is written.

The bounds are ``memstrata.limits``'s, each named in its error: at most ``MAX_MESSAGES`` messages
and ``MAX_ADD_CHARS`` characters of content per call, ``MAX_CONTENT_CHARS`` per message,
``MAX_NAME`` for a role or a name, ``MAX_EXTERNAL_ID`` for an id, ``MAX_METADATA_BYTES`` and
``MAX_METADATA_DEPTH`` for metadata; event times from the year ``MIN_EVENT_YEAR``.  Content and
metadata values are texts, roles, names, ids and metadata keys single lines (see
``limits.check_text``); two messages of one call may not share an ``id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstrata.errors import ValidationError
from memstrata.limits import (
    MAX_ADD_CHARS,
    MAX_CONTENT_CHARS,
    MAX_EXTERNAL_ID,
    MAX_MESSAGES,
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    MAX_NAME,
    MAX_TOOL_RESULT_CHARS,
    MIN_EVENT_YEAR,
    check_text,
)
from memstrata.model import parse_time
from memstrata.reader.parts import (
    Content,
    FilePart,
    ImagePart,
    ToolCall,
    parse_parts,
    parse_tool_calls,
)

_KEYS = (
    "role", "content", "timestamp", "name", "id", "metadata", "expires_at", "tool_calls",
    "tool_call_id",
)  # fmt: skip


@dataclass(frozen=True)
class Message:
    content: str
    role: str = "user"
    name: str | None = None
    timestamp: datetime | None = None
    external_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    #: an assistant message's calls of tools (``reader.parts``)
    tool_calls: tuple[ToolCall, ...] = ()
    #: a ``tool`` message's call id: ``content`` is that call's result
    tool_call_id: str | None = None
    images: tuple[ImagePart, ...] = ()
    files: tuple[FilePart, ...] = ()

    @property
    def structured(self) -> bool:
        """Whether the message is more than text: a tool call or result, images or files."""
        return bool(self.tool_calls or self.images or self.files or self.role == "tool")


def parse_messages(messages: object) -> list[Message]:
    """The validated messages of ``messages`` (see the module docstring)."""
    if isinstance(messages, str):
        return [Message(content=parse_content(messages, "content"))]
    if not isinstance(messages, (list, tuple)):
        raise ValidationError(
            f"messages must be a string or a list of messages, not {type(messages).__name__}"
        )
    if not messages:
        raise ValidationError("messages is empty", hint="pass at least one message")
    if len(messages) > MAX_MESSAGES:
        raise ValidationError(
            f"{len(messages)} messages in one call; at most {MAX_MESSAGES} are allowed",
            hint="add them in several calls",
        )
    parsed = [_message(m, f"messages[{i}]") for i, m in enumerate(messages)]
    total = sum(len(m.content) for m in parsed)
    if total > MAX_ADD_CHARS:
        raise ValidationError(
            f"the messages hold {total} characters; one call may add at most {MAX_ADD_CHARS}",
            hint="add them in several calls, or long text as a document (add_document)",
        )
    _check_unique_ids(parsed)
    return parsed


def parse_content(value: object, where: str) -> str:
    """``value`` as the text of a memory: a non-empty string within ``MAX_CONTENT_CHARS``."""
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string, not {type(value).__name__}")
    if len(value) > MAX_CONTENT_CHARS:
        raise ValidationError(
            f"{where} has {len(value)} characters; a message may have {MAX_CONTENT_CHARS}",
            hint="store long text as a document (add_document), which is split into chunks",
        )
    if not value.strip():
        raise ValidationError(f"{where} is empty", hint="memories need some text")
    return check_text(value, where, MAX_CONTENT_CHARS)


def parse_metadata(value: object, where: str) -> dict[str, Any]:
    """``value`` as an item's metadata: a JSON object with single-line string keys, every string
    valid text, at most ``MAX_METADATA_BYTES`` as JSON and ``MAX_METADATA_DEPTH`` deep."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where} must be a JSON object with string keys")
    try:  # in C, before any walk in Python: a huge or very deep value is refused fast
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except RecursionError as exc:
        raise ValidationError(
            f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where} is not JSON-serialisable: {exc}") from exc
    size = len(encoded.encode("utf-8", "surrogatepass"))
    if size > MAX_METADATA_BYTES:
        raise ValidationError(
            f"{where} takes {size} bytes as JSON; at most {MAX_METADATA_BYTES} are allowed",
            hint="keep metadata small: store long values as memories or documents",
        )
    _check_json(value, where)
    return dict(value)


def _message(raw: object, where: str) -> Message:
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{where} must be a mapping with role and content")
    unknown = sorted(set(map(str, raw)) - set(_KEYS))
    if unknown:
        raise ValidationError(
            f"{where} has unknown key(s) {', '.join(unknown)[:200]}",
            hint=f"known: {', '.join(_KEYS)}",
        )
    calls = () if raw.get("tool_calls") is None else parse_tool_calls(
        raw["tool_calls"], f"{where}.tool_calls"
    )  # fmt: skip
    role = _line(raw.get("role", "user"), f"{where}.role")
    content = _content(raw, where, role, bool(calls))
    call_id = raw.get("tool_call_id")
    if role == "tool" and call_id is None:
        raise ValidationError(f"{where} is a tool result without a tool_call_id")
    timestamp = raw.get("timestamp")
    expires_at = raw.get("expires_at")
    return Message(
        content=content.text,
        tool_calls=calls,
        tool_call_id=None if call_id is None else _line(call_id, f"{where}.tool_call_id"),
        images=content.images,
        files=content.files,
        role=role,
        name=None if raw.get("name") is None else _line(raw["name"], f"{where}.name"),
        timestamp=None if timestamp is None else _event_time(timestamp, f"{where}.timestamp"),
        external_id=_external_id(raw.get("id"), where),
        metadata=parse_metadata(raw.get("metadata"), f"{where}.metadata"),
        expires_at=None if expires_at is None else parse_time(expires_at, f"{where}.expires_at"),
    )


def _content(raw: Mapping[str, Any], where: str, role: str, calls: bool) -> Content:
    """A message's content: text, or a list of parts; empty only beside tool calls, images or
    files; a tool's result may be longer than other content (it is summarised)."""
    value = raw.get("content")
    if value is None and (calls or role == "tool"):
        return Content("")
    if value is None and "content" not in raw:
        raise ValidationError(f"{where} has no content")
    if isinstance(value, list):
        read = parse_parts(value, f"{where}.content")
    elif role == "tool":
        read = Content(check_text(value, f"{where}.content", MAX_TOOL_RESULT_CHARS))
    else:
        read = Content("" if calls and value == "" else parse_content(value, f"{where}.content"))
    if role == "tool" and len(read.text) > MAX_TOOL_RESULT_CHARS:
        raise ValidationError(f"{where}.content has over {MAX_TOOL_RESULT_CHARS} characters")
    if role != "tool" and len(read.text) > MAX_CONTENT_CHARS:
        parse_content(read.text, f"{where}.content")  # the one message-size error
    if not read.text.strip() and not (calls or read.images or read.files or role == "tool"):
        raise ValidationError(f"{where}.content is empty", hint="memories need some text")
    return read


def _line(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{where} must be a non-empty string")
    return check_text(value, where, MAX_NAME, line=True)


def _event_time(value: object, where: str) -> datetime:
    when = parse_time(value, where)
    if when.year < MIN_EVENT_YEAR:
        raise ValidationError(
            f"{where} is in the year {when.year}; event times start in the year {MIN_EVENT_YEAR}",
            hint="give the time as ISO 8601 with a four-digit year",
        )
    return when


def _external_id(value: object, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise ValidationError(f"{where}.id must be a non-empty string or an integer")
    if isinstance(value, int) and abs(value) >= 10**MAX_EXTERNAL_ID:  # str() of a huge int is slow
        raise ValidationError(f"{where}.id has over {MAX_EXTERNAL_ID} digits")
    return check_text(str(value), f"{where}.id", MAX_EXTERNAL_ID, line=True)


def _check_unique_ids(messages: list[Message]) -> None:
    """``ValidationError`` naming the first two messages of one call that share an ``id``."""
    first: dict[str, int] = {}
    for i, message in enumerate(messages):
        if message.external_id is None:
            continue
        if message.external_id in first:
            raise ValidationError(
                f"messages[{i}] has the id {message.external_id!r} of messages"
                f"[{first[message.external_id]}]: a duplicate id in one call",
                hint="give every message of a call its own id",
            )
        first[message.external_id] = i


def _check_json(value: object, where: str) -> None:
    """Walk ``value`` (without recursion): string keys that are lines, string values that are
    text, nesting at most ``MAX_METADATA_DEPTH`` deep.  Sizes are checked once it is encoded."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, str):
            check_text(node, f"{where} value", MAX_METADATA_BYTES)
            continue
        if not isinstance(node, (Mapping, list, tuple)):
            continue
        if depth > MAX_METADATA_DEPTH:
            raise ValidationError(
                f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep",
                hint="flatten it",
            )
        if isinstance(node, Mapping):
            for key, inner in node.items():
                if not isinstance(key, str):
                    raise ValidationError(f"{where} must be a JSON object with string keys")
                check_text(key, f"{where} key", MAX_NAME, line=True)
                pending.append((inner, depth + 1))
        else:
            pending.extend((inner, depth + 1) for inner in node)
