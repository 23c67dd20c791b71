"""Tool memory: the tools an agent called, stored as what they are.

``add`` hands the messages of a call here when they hold OpenAI-format tool calls (or when
``tools=`` definitions are given); ``trajectory`` turns them into items, written with the call's
turns in one transaction:

* a tool's **schema** (type ``tool``, long tier): name, description and parameters, once per cube
  and version.  From a definition passed in ``tools=``, or, for a tool called without one, as
  observed (its name and the argument keys of the call).  Its ``external_id`` is the schema's
  hash, so the same schema is stored once; a changed one is the next ``version``.
* each **call** (type ``tool_call``, long tier): the tool, its arguments (at most
  ``MAX_TOOL_ARGUMENTS_BYTES`` kept), a summary of its result (at most
  ``MAX_TOOL_SUMMARY_CHARS``: a result is never stored whole), ``success`` or ``error`` (the
  result's message metadata ``status``/``is_error``, an ``error`` key of a JSON result, or a
  result that begins with "error"), the duration when the tool message's metadata gives
  ``duration_ms``, and the turn it served (the last user turn before it).  Its text reads
  "get_weather(city=Paris) for: what's the weather in Paris → success: 18°C, sunny", so a
  question about a past call finds it.

A result whose call is not in the same ``add`` is kept as a call of the tool its message
``name`` says (``unknown`` without one).  Everything here is computed from the messages and one
read of the cube's schemas; nothing is called or fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memstrata.filters import Filters
from memstrata.limits import (
    MAX_TOOL_ARGUMENTS_BYTES,
    MAX_TOOL_SUMMARY_CHARS,
)
from memstrata.model import STATUSES, MemoryItem, new_id
from memstrata.reader.messages import Message
from memstrata.reader.parts import ToolCall, ToolSpec
from memstrata.store.base import ItemStore

#: The longest argument value shown in a call's text (the metadata keeps more).
SHOWN_VALUE = 60
#: The characters of the request a call served that its text repeats.
SHOWN_REQUEST = 200
_ERROR_START = re.compile(r"^\s*(error|exception|traceback|failed)\b", re.IGNORECASE)


@dataclass
class Draft:
    """Items for one ``add`` before they are written, per message: the item ``turn`` made of it
    (``bases``), the turn kept (None for a message without text, or a tool's result) and the
    calls it made or answered; then the tools' schemas."""

    bases: list[MemoryItem] = field(default_factory=list)
    turns: list[MemoryItem | None] = field(default_factory=list)
    calls: list[list[MemoryItem]] = field(default_factory=list)
    schemas: list[MemoryItem] = field(default_factory=list)

    @property
    def all_calls(self) -> list[MemoryItem]:
        return [c for made in self.calls for c in made]


def trajectory(
    store: ItemStore,
    messages: Sequence[Message],
    bases: Sequence[MemoryItem],
    specs: Sequence[ToolSpec],
) -> Draft:
    """The items of ``messages`` (see the module docs); ``bases`` holds each message's turn
    item, whose cube, session, user and times its calls share."""
    draft = Draft()
    pending: dict[str, MemoryItem] = {}
    served: MemoryItem | None = None
    template: MemoryItem | None = None
    for message, item in zip(messages, bases, strict=True):
        template = template or item
        keep = message.role != "tool" and bool(message.content.strip())
        draft.bases.append(item)
        draft.turns.append(item if keep else None)
        made: list[MemoryItem] = []
        draft.calls.append(made)
        if keep and message.role == "user":
            served = item
        for n, call in enumerate(message.tool_calls):
            made.append(_call_item(item, call, served))
            pending[call.call_id or f"{item.id}:{n}"] = made[-1]
        if message.role == "tool":
            found = pending.pop(message.tool_call_id or "", None)
            if found is None:
                orphan = ToolCall(message.tool_call_id, message.name or "unknown", {})
                found = _call_item(item, orphan, served)
                made.append(found)
            _record_result(found, message)
    if template is not None:
        draft.schemas = _schemas(store, template, specs, draft.all_calls)
    return draft


def _call_item(base: MemoryItem, call: ToolCall, served: MemoryItem | None) -> MemoryItem:
    arguments = bounded_arguments(call.arguments)
    request = " ".join(served.text.split())[:SHOWN_REQUEST] if served is not None else ""
    text = f"{call.name}({_shown_arguments(arguments)})" + (f" for: {request}" if request else "")
    return replace(
        base,
        id=new_id(),
        text=text,
        tier="long",
        type="tool_call",
        status="activated",
        role="assistant",
        speaker=None,
        key=call.name,
        external_id=None,
        metadata={
            "tool": call.name,
            "arguments": arguments,
            "call_id": call.call_id,
            "status": "pending",
            "turn": None if served is None else served.id,
        },
    )


def _record_result(item: MemoryItem, message: Message) -> None:
    """Write the result of ``message`` (a ``tool`` message) into its call's item, in place."""
    result = message.content
    status = "error" if _failed(result, message.metadata) else "success"
    summary = summarise(result)
    item.metadata.update(status=status, result_summary=summary, result_chars=len(result))
    duration = message.metadata.get("duration_ms")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration >= 0:
        item.metadata["duration_ms"] = duration
    if status == "error":
        item.metadata["error"] = summary
    item.text = f"{item.text} → {status}: {summary}"
    item.event_time = message.timestamp or item.event_time


def _failed(result: str, metadata: dict[str, Any]) -> bool:
    if metadata.get("status") == "error" or metadata.get("is_error") is True:
        return True
    if _ERROR_START.match(result):
        return True
    try:
        decoded = json.loads(result) if result.lstrip().startswith("{") else None
    except ValueError:
        return False
    return isinstance(decoded, dict) and bool(decoded.get("error"))


def summarise(result: str) -> str:
    """A tool's result in at most ``MAX_TOOL_SUMMARY_CHARS`` characters: its whitespace
    collapsed, cut with a note of its full length when longer."""
    flat = " ".join(result.split())
    if len(flat) <= MAX_TOOL_SUMMARY_CHARS:
        return flat
    note = f"… ({len(result)} characters)"
    return flat[: MAX_TOOL_SUMMARY_CHARS - len(note)] + note


def bounded_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments kept with a call: as given when their JSON fits
    ``MAX_TOOL_ARGUMENTS_BYTES``, else each value as a short text, else the keys only."""
    if _size(arguments) <= MAX_TOOL_ARGUMENTS_BYTES:
        return arguments
    short = {k: _short(v, SHOWN_VALUE * 2) for k, v in arguments.items()}
    if _size(short) <= MAX_TOOL_ARGUMENTS_BYTES:
        return short
    keys = list(arguments)[:50]
    return {k[:SHOWN_VALUE]: "…" for k in keys}


def argument_pattern(arguments: dict[str, Any]) -> dict[str, str]:
    """The shape of a call's arguments: each key with its JSON type (``string``, ``number``,
    ``boolean``, ``array``, ``object``, ``null``)."""
    return {k: _json_type(v) for k, v in arguments.items()}


def _schemas(
    store: ItemStore, base: MemoryItem, specs: Sequence[ToolSpec], calls: list[MemoryItem]
) -> list[MemoryItem]:
    """Schema items for the tools given, and for tools called that the cube has no schema of."""
    made: list[MemoryItem] = []
    named = {s.name for s in specs}
    for spec in specs:
        made.append(_schema_item(store, base, spec, observed=False))
    for call in calls:
        name = str(call.metadata["tool"])
        if name in named:
            continue
        named.add(name)
        if not _known(store, base.cube_id, name):
            keys = {k: {"type": v} for k, v in argument_pattern(call.metadata["arguments"]).items()}
            spec = ToolSpec(name, "", {"type": "object", "properties": keys})
            made.append(_schema_item(store, base, spec, observed=True))
    for item in made:  # link each call to its tool's schema
        for call in calls:
            if call.metadata["tool"] == item.key:
                call.metadata["schema"] = item.external_id
    return made


def _schema_item(
    store: ItemStore, base: MemoryItem, spec: ToolSpec, *, observed: bool
) -> MemoryItem:
    canonical = json.dumps(
        {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
        sort_keys=True, ensure_ascii=False,
    )  # fmt: skip
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    earlier = _versions(store, base.cube_id, spec.name)
    same = [i for i in earlier if i.external_id == f"tool:{digest}"]
    version = int(same[0].metadata.get("version", 1)) if same else len(earlier) + 1
    params = spec.parameters.get("properties", {})
    shown = ", ".join(
        f"{k}: {v.get('type', 'any') if isinstance(v, dict) else 'any'}" for k, v in params.items()
    )
    text = f"Tool {spec.name}({shown})" + (f": {spec.description}" if spec.description else "")
    return replace(
        base,
        id=new_id(),
        text=text,
        tier="long",
        type="tool",
        status="activated",
        role=None,
        speaker=None,
        key=spec.name,
        external_id=f"tool:{digest}",
        expires_at=None,  # a schema outlives the turns that used it
        metadata={
            "tool": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
            "version": version,
            "observed": observed,
        },
    )


def _versions(store: ItemStore, cube_id: str, name: str) -> list[MemoryItem]:
    wanted = Filters(types=("tool",), statuses=STATUSES, metadata={"tool": name})
    return store.list_items(cube_id, wanted)


def _known(store: ItemStore, cube_id: str, name: str) -> bool:
    return bool(_versions(store, cube_id, name))


def _shown_arguments(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_short(v, SHOWN_VALUE)}" for k, v in list(arguments.items())[:12])


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
