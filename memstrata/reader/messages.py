"""Validate ``add()`` input: a plain string, or a list of chat messages.

A message is a mapping with ``content`` (a non-empty string) and optionally ``role`` (default
``"user"``), ``name`` (the speaker), ``timestamp`` (ISO 8601, epoch seconds or datetime; when it
happened), ``id`` (the caller's own id, stored as ``external_id``) and ``metadata`` (a JSON
object).  Anything else is a ``ValidationError`` raised before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstrata.errors import ValidationError
from memstrata.model import parse_time

_KEYS = ("role", "content", "timestamp", "name", "id", "metadata")


@dataclass(frozen=True)
class Message:
    content: str
    role: str = "user"
    name: str | None = None
    timestamp: datetime | None = None
    external_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


#: Longest message content accepted (a turn, not a book: documents are chunked instead).
MAX_CONTENT_CHARS = 32_000


def parse_messages(messages: object) -> list[Message]:
    """The validated messages of ``messages`` (see the module docstring)."""
    if isinstance(messages, str):
        return [Message(content=_content(messages, "content"))]
    if not isinstance(messages, (list, tuple)):
        raise ValidationError(
            f"messages must be a string or a list of messages, not {type(messages).__name__}"
        )
    if not messages:
        raise ValidationError("messages is empty", hint="pass at least one message")
    return [_message(m, f"messages[{i}]") for i, m in enumerate(messages)]


def _message(raw: object, where: str) -> Message:
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{where} must be a mapping with role and content")
    unknown = sorted(set(map(str, raw)) - set(_KEYS))
    if unknown:
        raise ValidationError(
            f"{where} has unknown key(s) {', '.join(unknown)}", hint=f"known: {', '.join(_KEYS)}"
        )
    if "content" not in raw:
        raise ValidationError(f"{where} has no content")
    timestamp = raw.get("timestamp")
    return Message(
        content=_content(raw["content"], f"{where}.content"),
        role=_text(raw.get("role", "user"), f"{where}.role"),
        name=None if raw.get("name") is None else _text(raw["name"], f"{where}.name"),
        timestamp=None if timestamp is None else parse_time(timestamp, f"{where}.timestamp"),
        external_id=_external_id(raw.get("id"), where),
        metadata=_metadata(raw.get("metadata"), where),
    )


def _content(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{where} is empty", hint="memories need some text")
    if len(value) > MAX_CONTENT_CHARS:
        raise ValidationError(
            f"{where} has {len(value)} characters; a message may have {MAX_CONTENT_CHARS}",
            hint="store long text as a document (add_document), which is split into chunks",
        )
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{where} must be a non-empty string")
    return value


def _external_id(value: object, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise ValidationError(f"{where}.id must be a non-empty string or an integer")
    return str(value)


def _metadata(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValidationError(f"{where}.metadata must be a JSON object with string keys")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where}.metadata is not JSON-serialisable: {exc}") from exc
    return dict(value)
