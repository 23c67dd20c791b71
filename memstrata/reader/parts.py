"""Validate the structured parts of ``add()`` input: OpenAI-format tool calls, tool definitions
and multimodal content parts.  Pure functions; nothing is fetched, decoded data is bounded first.

* ``tool_calls`` of an assistant message: ``[{"id", "type": "function", "function": {"name",
  "arguments"}}]`` (``arguments`` a JSON text or an object) → ``ToolCall``s;
* ``tools=`` definitions: ``[{"type": "function", "function": {"name", "description",
  "parameters"}}]`` (or the function object itself) → ``ToolSpec``s;
* a content list: ``text`` / ``input_text`` parts (joined by newlines), ``image_url`` /
  ``input_image`` parts (a ``data:`` URL holding a PNG, JPEG, GIF or WebP image of at most
  ``MAX_IMAGE_BYTES``, or an ``http(s)`` address kept as a reference and never downloaded; an
  optional ``alt`` or ``caption``), ``input_file`` / ``file`` parts (``filename`` and
  ``file_data``, base64 or a ``data:`` URL, at most ``MAX_DOCUMENT_BYTES``) → ``ImagePart`` and
  ``FilePart``.  A ``file_id``, a ``file_url``, audio and anything else is a ``ValidationError``:
  there is no file store to resolve an id from, and no address is ever fetched.

Every bound is ``memstrata.limits``'s and named in its error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memstrata.errors import ValidationError
from memstrata.limits import (
    MAX_CONTENT_CHARS,
    MAX_DOCUMENT_BYTES,
    MAX_EXTERNAL_ID,
    MAX_FILENAME,
    MAX_IMAGE_BYTES,
    MAX_METADATA_BYTES,
    MAX_NAME,
    MAX_PARTS,
    MAX_REASON,
    MAX_TOOL_CALLS,
    MAX_TOOLS,
    MAX_URL_CHARS,
    check_text,
    shown,
)

#: The leading bytes of each image format kept, and its media type (the bytes decide it, not
#: what the client claims).
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
#: Every media type an image is kept as: the only ones a surface shows as an image
#: (``memory.media``; any other type is served as opaque bytes, never rendered).
IMAGE_TYPES: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")
_TEXT_PARTS = ("text", "input_text", "output_text")
_IMAGE_PARTS = ("image_url", "input_image")
_FILE_PARTS = ("input_file", "file")


@dataclass(frozen=True)
class ToolCall:
    """One call an assistant message makes: the caller's id for it, the tool and its arguments."""

    call_id: str | None
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolSpec:
    """A tool's definition: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ImagePart:
    """An image of a message: its bytes (from a ``data:`` URL) or a remote address, never both."""

    media_type: str | None
    data: bytes | None = None
    url: str | None = None
    caption: str | None = None


@dataclass(frozen=True)
class FilePart:
    """A file of a message, decoded; it is stored as a document."""

    filename: str
    data: bytes


@dataclass(frozen=True)
class Content:
    """A message's content read: its text and the images and files it carries."""

    text: str
    images: tuple[ImagePart, ...] = ()
    files: tuple[FilePart, ...] = ()


def parse_parts(value: list[Any], where: str) -> Content:
    """The parts of a content list (see the module docs), in order."""
    if len(value) > MAX_PARTS:
        raise ValidationError(f"{where} has {len(value)} parts; at most {MAX_PARTS} are allowed")
    texts: list[str] = []
    images: list[ImagePart] = []
    files: list[FilePart] = []
    for n, part in enumerate(value):
        at = f"{where}[{n}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise ValidationError(f"{at} must be an object with a type")
        kind = part["type"]
        if kind in _TEXT_PARTS:
            texts.append(check_text(part.get("text"), f"{at}.text", MAX_CONTENT_CHARS))
        elif kind in _IMAGE_PARTS:
            images.append(_image(part, at))
        elif kind in _FILE_PARTS:
            files.append(_file(part.get("file", part) if kind == "file" else part, at))
        else:
            raise ValidationError(
                f"{at} has the unknown part type {shown(kind)}",
                hint="parts may be text, input_text, image_url, input_image, input_file or file",
            )
    return Content("\n".join(t for t in texts if t.strip()), tuple(images), tuple(files))


def parse_tool_calls(value: object, where: str) -> tuple[ToolCall, ...]:
    """An assistant message's ``tool_calls`` (see the module docs)."""
    if not isinstance(value, list):
        raise ValidationError(f"{where} must be a list of tool calls")
    if len(value) > MAX_TOOL_CALLS:
        raise ValidationError(
            f"{where} has {len(value)} calls; at most {MAX_TOOL_CALLS} are allowed"
        )
    calls = []
    for n, raw in enumerate(value):
        at = f"{where}[{n}]"
        function = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(function, Mapping):
            raise ValidationError(f"{at} must be an object with a function (name, arguments)")
        call_id = raw.get("id")
        calls.append(
            ToolCall(
                call_id=None if call_id is None else _line(call_id, f"{at}.id", MAX_EXTERNAL_ID),
                name=_line(function.get("name"), f"{at}.function.name", MAX_NAME),
                arguments=_arguments(function.get("arguments"), f"{at}.function.arguments"),
            )
        )
    return tuple(calls)


def parse_tools(value: object) -> list[ToolSpec]:
    """``add(tools=…)``: the definitions of the tools a conversation may call."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValidationError("tools must be a list of tool definitions")
    if len(value) > MAX_TOOLS:
        raise ValidationError(f"{len(value)} tools given; at most {MAX_TOOLS} are allowed")
    specs = []
    for n, raw in enumerate(value):
        at = f"tools[{n}]"
        function = raw.get("function", raw) if isinstance(raw, Mapping) else None
        if not isinstance(function, Mapping):
            raise ValidationError(f"{at} must be a tool definition (type function, function)")
        description = function.get("description") or ""
        parameters = function.get("parameters") or {}
        if not isinstance(parameters, Mapping):
            raise ValidationError(f"{at}.parameters must be a JSON schema object")
        specs.append(
            ToolSpec(
                name=_line(function.get("name"), f"{at}.name", MAX_NAME),
                description=check_text(description, f"{at}.description", MAX_REASON),
                parameters=_bounded_json(parameters, f"{at}.parameters"),
            )
        )
    return specs


def _arguments(value: object, where: str) -> dict[str, Any]:
    """A call's arguments as an object: a JSON text is decoded (a text that is not a JSON object
    is kept as ``{"input": text}``, since models do send such)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        check_text(value, where, MAX_CONTENT_CHARS)
        try:
            decoded = json.loads(value)
        except ValueError:
            return {"input": value}
        value = decoded if isinstance(decoded, Mapping) else {"input": decoded}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where} must be a JSON object or a JSON text")
    return _bounded_json(value, where, MAX_CONTENT_CHARS)


def _bounded_json(
    value: Mapping[str, Any], where: str, limit: int = MAX_METADATA_BYTES
) -> dict[str, Any]:
    """``value`` when it is JSON of at most ``limit`` bytes whose strings are text."""
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"{where} is not JSON: {exc}") from exc
    if len(encoded.encode("utf-8", "surrogatepass")) > limit:
        raise ValidationError(f"{where} takes over {limit} bytes as JSON")
    check_text(encoded, where, limit * 2)
    decoded: dict[str, Any] = json.loads(encoded)
    return decoded


def _image(part: Mapping[str, Any], where: str) -> ImagePart:
    address = part.get("image_url")
    if isinstance(address, Mapping):
        address = address.get("url")
    if part.get("file_id") is not None:
        raise ValidationError(
            f"{where} names a file_id; there is no file store to read it from",
            hint="send the image as a data: URL, or an https address kept as a reference",
        )
    url = _line(address, f"{where}.image_url", MAX_URL_CHARS)
    caption = part.get("alt", part.get("caption"))
    if caption is not None:
        caption = check_text(caption, f"{where}.alt", MAX_REASON)
    if url.startswith("data:"):
        _, data = _data_url(url, where, MAX_IMAGE_BYTES)
        return ImagePart(media_type=_image_type(data, where), data=data, caption=caption)
    if not url.lower().startswith(("https://", "http://")):
        raise ValidationError(
            f"{where}.image_url must be a data: URL or an http(s) address",
            hint="an address is stored as a reference: it is never downloaded",
        )
    return ImagePart(media_type=None, url=url, caption=caption)


def _file(part: object, where: str) -> FilePart:
    if not isinstance(part, Mapping):
        raise ValidationError(f"{where}.file must be an object with filename and file_data")
    if part.get("file_id") is not None or part.get("file_url") is not None:
        raise ValidationError(
            f"{where} names a file by id or address; neither is fetched",
            hint="send the file's bytes as file_data (base64 or a data: URL) with a filename",
        )
    filename = _line(part.get("filename"), f"{where}.filename", MAX_FILENAME)
    data = part.get("file_data")
    if not isinstance(data, str) or not data:
        raise ValidationError(f"{where}.file_data must be base64 text or a data: URL")
    if data.startswith("data:"):
        return FilePart(filename, _data_url(data, where, MAX_DOCUMENT_BYTES)[1])
    return FilePart(filename, _base64(data, f"{where}.file_data", MAX_DOCUMENT_BYTES))


def _data_url(url: str, where: str, limit: int) -> tuple[str, bytes]:
    """The media type and the decoded bytes of a base64 ``data:`` URL."""
    head, comma, body = url.partition(",")
    if not comma or not head.endswith(";base64"):
        raise ValidationError(f"{where} is a data: URL without base64 data")
    return head[5:-7], _base64(body, where, limit)


def _base64(text: str, where: str, limit: int) -> bytes:
    """``text`` decoded as strict base64, refused by its length before any decoding when the
    bytes would exceed ``limit``."""
    if len(text) > (limit + 2) // 3 * 4:
        raise ValidationError(f"{where} holds over {limit} bytes; at most {limit} are allowed")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValidationError(f"{where} is not valid base64") from exc


def _image_type(data: bytes, where: str) -> str:
    for magic, media in _MAGIC:
        if data.startswith(magic):
            return media
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise ValidationError(
        f"{where} is not a PNG, JPEG, GIF or WebP image", hint="images are kept as they are sent"
    )


def _line(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{where} must be a non-empty string")
    return check_text(value, where, limit, line=True)
