"""Memory items: ``/memories…`` (add messages or a document, list, get, update, delete, history)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import pydantic
from fastapi import Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from memstrata.errors import ValidationError
from memstrata.limits import MAX_OFFSET, MAX_TOP_K
from memstrata.memory.system import MemoryOS
from memstrata.model import ItemType, Status, Tier, User
from memstrata.reader.parts import IMAGE_TYPES
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import JSON_ERRORS, check_self, make_router
from memstrata.server.schemas import Added, AddIn, ErrorBody, MemoryOut, UpdateIn, VersionOut

router = make_router("memories")

#: The form fields of a document upload (``file`` is the document itself).
_FORM_FIELDS = ("file", "cube_id", "mem_cube_id", "session_id", "user_id", "expires_at")
_UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["file", "cube_id"],
    "properties": {
        "file": {
            "type": "string",
            "format": "binary",
            "description": "A .txt, .md, .json or .pdf document; its name's suffix says which.",
        },
        "cube_id": {"type": "string"},
        "session_id": {"type": "string"},
    },
}
_ADD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": AddIn.model_json_schema()},
            "multipart/form-data": {"schema": _UPLOAD_SCHEMA},
        },
    }
}
_AS_OF = "A past time (ISO 8601 or epoch seconds): the version current then."
_METADATA = (
    "A JSON object: items whose metadata has each key equal to its value (a string, number, "
    "boolean or null), as the search filter ``metadata``."
)


@router.post(
    "/memories",
    openapi_extra=_ADD_BODY,
    responses={415: {"model": ErrorBody, "description": "Neither JSON nor multipart"}},
    summary="Add messages, a text or a document",
)
async def add_memories(request: Request, memory: Memory, user: Caller) -> Added:
    """Remember chat ``messages`` or one ``memory_content`` text (JSON), or a document (multipart).

    Needs write on the cube.  Messages are searchable when this returns; a document is split into
    chunks (each a ``long``/``chunk`` item with its span in the document as its source).  Tool
    calls, tool results, content parts and ``tools`` are stored as ``MemoryOS.add`` stores them
    (tool schemas and calls, images, files: docs/tools-skills.md); the ids are of every item.
    """
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "multipart/form-data":
        return await _add_document(request, memory, user)
    if media != "application/json" and not media.endswith("+json"):
        raise HTTPException(
            415, detail="send application/json (messages) or multipart/form-data (a document)"
        )
    body = _parse(await request.body())
    check_self(body.user_id, user)
    ids = await run_in_threadpool(
        memory.add,
        _content(body),
        user_id=user.user_id,
        cube_id=body.cube_id,
        session_id=body.session_id,
        expires_at=body.expires_at,
        tools=body.tools,
    )
    return Added(ids=ids)


def _content(body: AddIn) -> list[dict[str, Any]] | str:
    """What ``MemoryOS.add`` gets: the messages or the one text (exactly one must be given)."""
    if body.memory_content is None and body.messages is not None:
        return body.messages
    if body.messages is None and body.memory_content is not None:
        return body.memory_content
    raise ValidationError("give either messages or memory_content, not both or neither")


def _parse(raw: bytes) -> AddIn:
    """The JSON body; a 422 (like FastAPI's own) when it is not JSON or does not fit ``AddIn``."""
    try:
        return AddIn.model_validate_json(raw)
    except pydantic.ValidationError as exc:
        problems = [{**p, "loc": ("body", *p["loc"])} for p in exc.errors(include_url=False)]
        raise RequestValidationError(problems) from exc


async def _add_document(request: Request, memory: MemoryOS, user: User) -> Added:
    """The multipart upload: fields ``file``, ``cube_id`` (or ``mem_cube_id``), ``session_id``."""
    async with request.form(max_files=1, max_fields=len(_FORM_FIELDS)) as form:
        unknown = sorted(set(form) - set(_FORM_FIELDS))
        if unknown:
            raise ValidationError(
                f"unknown form field(s): {', '.join(unknown)}",
                hint="send file, cube_id and optionally session_id",
            )
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ValidationError("the upload has no file field named 'file'")
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        cube_id = fields.get("cube_id") or fields.get("mem_cube_id")
        if not cube_id:
            raise ValidationError("the upload has no cube_id field")
        check_self(fields.get("user_id"), user)
        data = await upload.read()
        filename = upload.filename or ""
    ids = await run_in_threadpool(
        memory.add_document,
        data,
        filename=filename,
        user_id=user.user_id,
        cube_id=cube_id,
        session_id=fields.get("session_id"),
        expires_at=fields.get("expires_at") or None,
    )
    return Added(ids=ids)


@router.get("/memories/{cube_id}", summary="A page of a cube's items, oldest event first")
def list_memories(
    cube_id: str,
    memory: Memory,
    user: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items to skip.")] = 0,
    session_id: str | None = None,
    tier: Annotated[list[Tier] | None, Query()] = None,
    kind: Annotated[list[ItemType] | None, Query(alias="type")] = None,
    status: Annotated[list[Status] | None, Query()] = None,
    metadata: Annotated[str | None, Query(description=_METADATA)] = None,
) -> list[MemoryOut]:
    """Items passing the filters (repeat ``tier``, ``type``, ``status`` for several); needs read.

    Without ``status``, only ``generated`` and ``activated`` items are listed.
    """
    given = {
        "session_id": session_id, "tier": tier, "type": kind, "status": status,
        "metadata": None if metadata is None else _metadata(metadata),
    }  # fmt: skip
    filters = {key: value for key, value in given.items() if value is not None}
    found = memory.list_memories(
        cube_id, user_id=user.user_id, filters=filters, limit=limit, offset=offset
    )
    return [MemoryOut.of(i) for i in found]


def _metadata(raw: str) -> Any:
    """The ``metadata`` parameter's JSON object (the core checks its keys and values)."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValidationError(
            "the metadata filter is not JSON", hint='send a JSON object: {"key": "value"}'
        ) from exc
    if not isinstance(value, dict):
        raise ValidationError("the metadata filter must be a JSON object", hint='{"key": "value"}')
    return value


@router.get("/memories/{cube_id}/{memory_id}", summary="An item, as it is now or was then")
def get_memory(
    cube_id: str,
    memory_id: str,
    memory: Memory,
    user: Caller,
    as_of: Annotated[datetime | None, Query(description=_AS_OF)] = None,
) -> MemoryOut:
    """The current version (needs read); with ``as_of``, the version current at that time.

    An item that did not exist yet is a 404; a time in the future or before the cube was created
    is a 422.
    """
    return MemoryOut.of(memory.get(memory_id, user_id=user.user_id, cube_id=cube_id, as_of=as_of))


@router.put("/memories/{cube_id}/{memory_id}", summary="Write a new version of an item")
def update_memory(
    cube_id: str, memory_id: str, body: UpdateIn, memory: Memory, user: Caller
) -> MemoryOut:
    """New ``text``, ``metadata`` and/or ``expires_at`` (needs write); the old version stays
    in the history."""
    item = memory.update(
        memory_id,
        user_id=user.user_id,
        text=body.text,
        metadata=body.metadata,
        reason=body.reason,
        cube_id=cube_id,
        expires_at=body.expires_at,
    )
    return MemoryOut.of(item)


@router.delete("/memories/{cube_id}/{memory_id}", summary="Soft-delete an item")
def delete_memory(
    cube_id: str, memory_id: str, memory: Memory, user: Caller, reason: str | None = None
) -> MemoryOut:
    """Status ``deleted``: out of search, history kept (needs write).  Idempotent."""
    item = memory.delete(memory_id, user_id=user.user_id, reason=reason, cube_id=cube_id)
    return MemoryOut.of(item)


@router.get("/memories/{cube_id}/{memory_id}/history", summary="Every version of an item")
def history(cube_id: str, memory_id: str, memory: Memory, user: Caller) -> list[VersionOut]:
    """Oldest first, each with who made it, when and why."""
    versions = memory.history(memory_id, user_id=user.user_id, cube_id=cube_id)
    return [VersionOut.of(v) for v in versions]


_IMAGE = {
    "description": "The image's bytes (PNG, JPEG, GIF or WebP; the bytes decided the type)",
    "content": {media: {"schema": {"type": "string", "format": "binary"}} for media in IMAGE_TYPES},
}


@router.get(
    "/memories/{cube_id}/{memory_id}/image",
    response_class=Response,
    responses={**JSON_ERRORS, 200: _IMAGE},
    summary="The bytes of an image a message sent",
)
def get_image(cube_id: str, memory_id: str, memory: Memory, user: Caller) -> Response:
    """An ``image`` item's file (``MemoryOS.get_image``; needs read); 404 for another item, an
    image kept as an address (never fetched), or one whose file changed on disk."""
    media, data = memory.get_image(memory_id, user_id=user.user_id, cube_id=cube_id)
    return Response(data, headers=image_headers(media, memory_id))


def image_headers(media: str, memory_id: str) -> dict[str, str]:
    """The headers an image is served with, on the inspector's origin: its bytes are a client's.

    Shown inline only as one of the four image types; any other type (an item's metadata is a
    writer's to change) is a download of opaque bytes.  ``nosniff`` stops a browser from reading
    the bytes as another type, and the sandboxing policy from running script in them even when
    the page is opened on its own.
    """
    shown = media in IMAGE_TYPES
    name = "".join(c for c in memory_id if c.isalnum() or c in "-_") or "image"
    return {
        "Content-Type": media if shown else "application/octet-stream",
        "Content-Disposition": "inline" if shown else f'attachment; filename="{name}"',
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; sandbox",
        "Cache-Control": "private, no-store",
    }
