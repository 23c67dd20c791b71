"""The MemOS product API: ``/product/add``, ``/product/search``, ``/product/feedback`` and
``/product/get_memory``, so a MemOS plugin can be pointed at memstrata (docs/memos-compat.md).

Each route maps MemOS's request (``server.product_schemas``) onto ``MemoryOS`` calls and answers
in MemOS's envelope ``{"code": 200, "message", "data"}``; errors keep memstrata's shape and
status (a 4xx with a message).  Who acts is the API key's user: a body ``user_id`` naming
another user is refused (403) unless the caller is an admin, who then acts for that user with
that user's grants (``acting``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memstrata import wire
from memstrata.errors import PermissionDenied, ValidationError
from memstrata.limits import MAX_TOP_K
from memstrata.memory.skills import outcome_of
from memstrata.memory.system import MemoryOS
from memstrata.model import Hit, MemoryItem, User
from memstrata.server.auth import Caller, Memory
from memstrata.server.product_schemas import (
    ProductAddIn,
    ProductFeedbackIn,
    ProductGetIn,
    ProductOut,
    ProductSearchIn,
)
from memstrata.server.routes import make_router

router = make_router("product (MemOS)")

#: The message keys of MemOS's ``MessageDict`` that memstrata reads, and the names it reads them
#: by; every other key of a message is dropped (docs/memos-compat.md).
_MESSAGE_KEYS = {
    "role": "role", "content": "content", "name": "name", "chat_time": "timestamp",
    "timestamp": "timestamp", "message_id": "id", "id": "id", "tool_calls": "tool_calls",
    "tool_call_id": "tool_call_id", "metadata": "metadata",
}  # fmt: skip
#: MemOS's name of each memstrata item type (``metadata.memory_type``).
_MEMOS_TYPES = {
    "turn": "WorkingMemory", "segment": "LongTermMemory", "fact": "LongTermMemory",
    "knowledge": "LongTermMemory", "profile": "UserMemory", "preference": "PreferenceMemory",
    "chunk": "RawFileMemory", "image": "RawFileMemory", "tool": "ToolSchemaMemory",
    "tool_call": "ToolTrajectoryMemory", "skill": "SkillMemory",
}  # fmt: skip
#: The buckets of ``get_memory`` and the filters each lists.
_BUCKETS: dict[str, dict[str, Any]] = {
    "text_mem": {"type": ["turn", "segment", "fact", "profile", "knowledge", "chunk", "image"]},
    "pref_mem": {"type": ["preference"]},
    "tool_mem": {"type": ["tool", "tool_call"]},
    "skill_mem": {"type": ["skill"]},
}


def acting(claimed: str | None, user: User) -> str:
    """The user a request acts for: the caller, or the body's ``user_id`` when an admin sends it;
    another user's id from anyone else is ``PermissionDenied``."""
    if claimed is None or claimed == user.user_id:
        return user.user_id
    if user.role != "admin":
        raise PermissionDenied(user.user_id, f"(user {claimed})", "act for")
    return claimed


def _cube(memory: MemoryOS, user_id: str, cube_ids: Sequence[str] | None, cube: str | None) -> str:
    """The cube written to: the first writable cube named, the MemOS cube, or the user's own."""
    if cube_ids:
        return cube_ids[0]
    return cube or memory.default_cube(user_id).cube_id


def _scope(cube_ids: Sequence[str] | None, cube: str | None) -> list[str] | None:
    return list(cube_ids) if cube_ids else ([cube] if cube else None)


def _messages(body: ProductAddIn) -> list[dict[str, Any]] | str:
    if body.messages is None and body.memory_content is None:
        raise ValidationError("nothing to add", hint="send messages or memory_content")
    if isinstance(body.messages, str) or body.messages is None:
        return body.messages if body.messages is not None else str(body.memory_content)
    return [
        {_MESSAGE_KEYS[k]: v for k, v in m.items() if k in _MESSAGE_KEYS} for m in body.messages
    ]


def _memory(item: MemoryItem, score: float | None = None) -> dict[str, Any]:
    """One memory in MemOS's shape: ``id``, ``memory`` (the text) and ``metadata``."""
    shown = wire.item_to_wire(item)
    metadata = {
        **{k: shown[k] for k in ("user_id", "session_id", "status", "type", "key", "confidence",
                                 "tags", "sources", "created_at", "updated_at", "version")},
        "memory_type": _MEMOS_TYPES.get(item.type, "LongTermMemory"),
        "info": shown["metadata"],
    }  # fmt: skip
    if score is not None:
        metadata["relativity"] = score
    return {"id": item.id, "memory": item.text, "ref_id": f"[{item.id[-8:]}]", "metadata": metadata}


def _by_cube(found: Iterable[tuple[MemoryItem, float | None]]) -> list[dict[str, Any]]:
    cubes: dict[str, list[dict[str, Any]]] = {}
    for item, score in found:
        cubes.setdefault(item.cube_id, []).append(_memory(item, score))
    return [{"cube_id": c, "memories": m} for c, m in cubes.items()]


def _hits(hits: list[Hit]) -> list[dict[str, Any]]:
    return _by_cube((h.item, h.score) for h in hits)


def _bucket_k(value: int, name: str) -> int:
    if isinstance(value, bool) or not 0 <= value <= MAX_TOP_K:
        raise ValidationError(f"{name} must be between 0 and {MAX_TOP_K}")
    return value


@router.post("/product/add", summary="MemOS: add messages (or feedback with is_feedback)")
def add(body: ProductAddIn, memory: Memory, user: Caller) -> ProductOut:
    """Messages are stored as ``MemoryOS.add`` stores them (tool calls, images and files
    included); with ``is_feedback`` the last user message is ``MemoryOS.feedback``."""
    user_id = acting(body.user_id, user)
    cube_id = _cube(memory, user_id, body.writable_cube_ids, body.mem_cube_id)
    messages = _messages(body)
    if body.is_feedback:
        said = [m for m in messages if m.get("role", "user") == "user"] if isinstance(
            messages, list) else [{"content": messages}]  # fmt: skip
        text = said[-1].get("content") if said else None
        if not isinstance(text, str):
            raise ValidationError("is_feedback needs a user message with text")
        result = memory.feedback(text, user_id=user_id, cube_id=cube_id)
        return ProductOut(message="Feedback applied", data=wire.to_wire(result))
    ids = memory.add(
        messages, user_id=user_id, cube_id=cube_id, session_id=body.session_id, tools=body.tools
    )
    data = [{"memory_id": i, "cube_id": cube_id} for i in ids]
    return ProductOut(message="Memory added successfully", data=data)


@router.post("/product/search", summary="MemOS: search, answered in six buckets")
def search(body: ProductSearchIn, memory: Memory, user: Caller) -> ProductOut:
    """``text_mem`` (``MemoryOS.search``), ``pref_mem`` (preference items), ``tool_mem``
    (``include=["tool"]``), ``skill_mem`` (``include=["skill"]``), ``act_mem`` and ``para_mem``
    (the cubes' KV caches and adapters); a bucket not asked for, or with a top_k of 0, is empty."""
    user_id = acting(body.user_id, user)
    scope = _scope(body.readable_cube_ids, body.mem_cube_id)
    asked = {
        "pref_mem": (body.include_preference, _bucket_k(body.pref_top_k, "pref_top_k")),
        "tool_mem": (body.search_tool_memory, _bucket_k(body.tool_mem_top_k, "tool_mem_top_k")),
        "skill_mem": (
            body.include_skill_memory, _bucket_k(body.skill_mem_top_k, "skill_mem_top_k")
        ),
    }  # fmt: skip
    run: dict[str, dict[str, Any]] = {
        "pref_mem": {"filters": {"type": "preference"}},
        "tool_mem": {"include": ["tool"]},
        "skill_mem": {"include": ["skill"]},
    }
    text = memory.search(body.query, user_id=user_id, cube_ids=scope, top_k=body.top_k)
    data: dict[str, Any] = {"text_mem": _hits(text)}
    for name, (wanted, k) in asked.items():
        hits = memory.search(
            body.query, user_id=user_id, cube_ids=scope, top_k=k, **run[name]
        ) if wanted and k else []  # fmt: skip
        data[name] = _hits(hits)
    artifacts = _artifacts(memory, user_id, scope)
    data["act_mem"], data["para_mem"] = artifacts["kv_cache"], artifacts["lora"]
    return ProductOut(message="Search completed successfully", data=data)


def _artifacts(
    memory: MemoryOS, user_id: str, scope: list[str] | None
) -> dict[str, list[dict[str, Any]]]:
    """The cubes' KV caches (activation memory) and adapters (parametric memory), described."""
    cube_ids = (
        scope if scope is not None else [c.cube_id for c in memory.list_cubes(user_id=user_id)]
    )
    found: dict[str, list[dict[str, Any]]] = {"kv_cache": [], "lora": []}
    for cube_id in cube_ids[:MAX_TOP_K]:
        for artifact in memory.artifacts(cube_id, user_id=user_id):
            if artifact.kind in found:
                about = {k: v for k, v in artifact.metadata.items() if k != "mac"}
                entry = {"id": artifact.artifact_id, "memory": artifact.kind, "metadata": about}
                found[artifact.kind].append({"cube_id": cube_id, "memories": [entry]})
    return found


@router.post("/product/feedback", summary="MemOS: feedback on memories and on a task")
def feedback(body: ProductFeedbackIn, memory: Memory, user: Caller) -> ProductOut:
    """``MemoryOS.feedback`` on ``retrieved_memory_ids`` (or the memories the text names), and
    with a ``session_id``, ``MemoryOS.end_task``: a skill learnt or demoted."""
    user_id = acting(body.user_id, user)
    cube_id = _cube(memory, user_id, body.writable_cube_ids, body.mem_cube_id)
    outcome = body.task_outcome
    data: dict[str, Any] = {}
    if outcome is None or body.retrieved_memory_ids or body.corrected_answer:
        result = memory.feedback(
            body.feedback_content, user_id=user_id, cube_id=cube_id,
            item_ids=body.retrieved_memory_ids, corrected=body.corrected_answer,
        )  # fmt: skip
        data = wire.to_wire(result)
        outcome = outcome or outcome_of(result.kind)
    if body.session_id is not None and outcome is not None:
        skills = memory.end_task(
            user_id=user_id, cube_id=cube_id, session_id=body.session_id, outcome=outcome
        )
        data["skills"] = [_memory(s) for s in skills]
    return ProductOut(message="Feedback applied", data=data)


@router.post("/product/get_memory", summary="MemOS: a page of a cube's memories, by bucket")
def get_memory(body: ProductGetIn, memory: Memory, user: Caller) -> ProductOut:
    """``MemoryOS.list_memories`` of each cube named (default: the user's own), one bucket or
    all: ``text_mem``, ``pref_mem``, ``tool_mem``, ``skill_mem``; ``page`` counts from 1."""
    user_id = acting(body.user_id, user)
    wanted = [body.memory_type] if body.memory_type else list(_BUCKETS)
    unknown = [w for w in wanted if w not in _BUCKETS]
    if unknown:
        raise ValidationError(f"unknown memory_type {unknown[0]!r}", hint=", ".join(_BUCKETS))
    if isinstance(body.page, bool) or body.page < 1:
        raise ValidationError("page counts from 1")
    cube_ids = _scope(body.readable_cube_ids, body.mem_cube_id)
    cube_ids = cube_ids or [memory.default_cube(user_id).cube_id]
    offset = (body.page - 1) * max(1, body.page_size)
    data = {
        bucket: _by_cube(
            (item, None)
            for cube_id in cube_ids
            for item in memory.list_memories(
                cube_id,
                user_id=user_id,
                filters=_BUCKETS[bucket],
                limit=body.page_size,
                offset=offset,
            )
        )
        for bucket in wanted
    }
    return ProductOut(message="Memories retrieved successfully", data=data)
