"""The one JSON shape of the data model on every wire: REST, the Python client, MCP, ``--json``.

Each surface renders the core's dataclasses through here, and the client reads them back through
here, so a field added to ``MemoryItem`` reaches every surface and survives the round trip.

Shapes (``to_wire`` makes them, ``*_from_wire`` reads them back exactly):

- **record** — any dataclass of ``memstrata.model`` (and ``Task``, ``Context``'s parts…): an
  object with *every* field under its own name.  Times are ISO 8601 strings (``isoformat``; a
  reader also takes ``Z`` and epoch seconds), ``None`` is ``null``, tuples are arrays and nested
  dataclasses are nested objects.  An **item** is the record of a ``MemoryItem``: its
  ``sources`` are objects with all four of ``item_id``, ``uri``, ``span`` (``[start, end]``) and
  ``role``.
- **hit** (``hit_to_wire``) — the REST API's search hit: the item's fields, flat, plus ``score``
  (fused relevance, higher is better), ``ranks`` (channel → 1-based rank) and, when asked for,
  ``parts``: what the score is made of, each the record of a ``Part`` (``kind``, ``name``,
  ``value``, ``reason``, ``rank``, ``factor``; the values sum to the score).  A hit without
  ``parts`` (the default answer, or an older server's) reads back with no parts.
- **scored hit** (``scored_hit_to_wire``; ``to_wire(hit)`` is the one with parts) — the same
  parts nested: ``{"item", "score", "ranks"}`` and, when asked for, ``"parts"``; how MCP tools
  and the CLI's ``--json`` show a hit.
- **context** — ``text``, ``tokens``, ``budget``, ``profile`` lines, ``items`` (every item,
  recent turns first) and ``hits`` (flat hits without their parts, rank order).

``part_text`` is a part in words, the same on every surface a person reads (the CLI's
``--explain``, the inspector): ``keyword #2 +0.0417``, ``speaker ×0.5 -0.0450 (other speaker)``.

Reading is strict: a missing field, an unknown one or a value of the wrong type raises
``WireError`` naming it; nothing is filled in with a default.  Pure functions, thread-safe.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from memstrata.errors import ValidationError
from memstrata.memcube import Artifact
from memstrata.model import Hit, MemoryItem, Part, Version, parse_time
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import ChatReply

__all__ = [
    "WireError",
    "artifact_to_wire",
    "chat_reply_from_wire",
    "chat_reply_to_wire",
    "context_from_wire",
    "context_to_wire",
    "hit_from_wire",
    "hit_to_wire",
    "item_from_wire",
    "item_to_wire",
    "part_text",
    "record_from_wire",
    "scored_hit_to_wire",
    "to_wire",
    "version_from_wire",
]

T = TypeVar("T")
#: The keys a flat hit adds to its item's fields (``parts`` only when asked for).
HIT_KEYS = ("score", "ranks", "parts")


class WireError(ValueError):
    """A JSON value that is not the shape it should be (which field, and what is wrong)."""


# -- writing -------------------------------------------------------------------------------------


def to_wire(value: object) -> Any:
    """``value`` as JSON-ready data: dataclasses as records (see the module docs), recursively."""
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    return value


def item_to_wire(item: MemoryItem) -> dict[str, Any]:
    """Every field of ``item`` (see the module docs)."""
    wire: dict[str, Any] = to_wire(item)
    return wire


def hit_to_wire(hit: Hit, *, parts: bool = True) -> dict[str, Any]:
    """A flat hit: the item's fields, ``score``, ``ranks`` and (with ``parts``) ``parts``."""
    flat = item_to_wire(hit.item) | {"score": hit.score, "ranks": dict(hit.ranks)}
    return flat | {"parts": to_wire(hit.parts)} if parts else flat


def scored_hit_to_wire(hit: Hit, *, parts: bool = True) -> dict[str, Any]:
    """A scored hit: ``{"item", "score", "ranks"}`` and (with ``parts``) ``"parts"``."""
    nested = {"item": item_to_wire(hit.item), "score": hit.score, "ranks": dict(hit.ranks)}
    return nested | {"parts": to_wire(hit.parts)} if parts else nested


def part_text(part: Part) -> str:
    """``part`` in words: a channel's name, rank and contribution (``dense #1 +0.0476``); an
    adjustment's name, factor when it has one, signed value (four decimals, like the scores
    shown; left out for a note that changed nothing, whose value is exactly 0) and reason in
    parentheses when it has one (``speaker ×0.5 -0.0450 (other speaker)``)."""
    words = [part.name]
    if part.rank is not None:
        words.append(f"#{part.rank}")
    if part.factor is not None:
        words.append(f"×{part.factor:g}")
    if part.value != 0.0 or part.kind == "channel" or part.factor is not None:
        words.append(f"{part.value:+.4f}")
    if part.reason:
        words.append(f"({part.reason})")
    return " ".join(words)


def context_to_wire(context: Context) -> dict[str, Any]:
    """A packed context: its text and counts, every item (recent turns first), the flat hits."""
    return {
        "text": context.text,
        "tokens": context.tokens,
        "budget": context.budget,
        "profile": list(context.profile),
        "items": [item_to_wire(i) for i in context.items],
        "hits": [hit_to_wire(h, parts=False) for h in context.hits],
    }


def artifact_to_wire(artifact: Artifact) -> dict[str, Any]:
    """A cube's artifact as the surfaces show it: its row without where its file is kept."""
    return {
        "artifact_id": artifact.artifact_id, "kind": artifact.kind,
        "fingerprint": artifact.fingerprint, "sha256": artifact.sha256,
        "size_bytes": artifact.size_bytes, "metadata": artifact.metadata,
        "created_at": to_wire(artifact.created_at),
    }  # fmt: skip


def chat_reply_to_wire(reply: ChatReply) -> dict[str, Any]:
    """A chat answer, the ids of the stored turns, the context used (or null), and the KV
    cache artifact the model started from (or null)."""
    context = None if reply.context is None else context_to_wire(reply.context)
    return {
        "answer": reply.answer,
        "ids": list(reply.ids),
        "context": context,
        "activation": reply.activation,
    }


# -- reading -------------------------------------------------------------------------------------


def record_from_wire(kind: type[T], data: object) -> T:
    """The ``kind`` dataclass that ``data`` (a record) is; ``WireError`` if it is not one."""
    return _decode(kind, data, kind.__name__)  # type: ignore[no-any-return]


def item_from_wire(data: object) -> MemoryItem:
    """The ``MemoryItem`` of an item record, exactly as it was written."""
    return record_from_wire(MemoryItem, data)


def hit_from_wire(data: object) -> Hit:
    """The ``Hit`` of a flat hit; without ``parts`` (not asked for, or an older server) its
    ``parts`` are empty."""
    record = _object(data, "Hit")
    missing = [key for key in HIT_KEYS[:2] if key not in record]
    if missing:
        raise WireError(f"Hit has no {', '.join(missing)}")
    item = {k: v for k, v in record.items() if k not in HIT_KEYS}
    return Hit(
        item=item_from_wire(item),
        score=_decode(float, record["score"], "Hit.score"),
        ranks=_decode(dict[str, int], record["ranks"], "Hit.ranks"),
        parts=_decode(tuple[Part, ...], record.get("parts", []), "Hit.parts"),
    )


def version_from_wire(data: object) -> Version:
    """The ``Version`` of a version record (its ``item`` an item record)."""
    return record_from_wire(Version, data)


def context_from_wire(data: object) -> Context:
    """The ``Context`` of a context; ``items`` is the recent turns, then the hits' items."""
    record = _object(data, "Context")
    hits = [hit_from_wire(h) for h in _decode(list[Any], record.get("hits"), "Context.hits")]
    items = [item_from_wire(i) for i in _decode(list[Any], record.get("items"), "Context.items")]
    return Context(
        text=_decode(str, record.get("text"), "Context.text"),
        tokens=_decode(int, record.get("tokens"), "Context.tokens"),
        budget=_decode(int, record.get("budget"), "Context.budget"),
        hits=hits,
        recent=items[: len(items) - len(hits)],
        profile=_decode(list[str], record.get("profile"), "Context.profile"),
    )


def chat_reply_from_wire(data: object) -> ChatReply:
    """The ``ChatReply`` of a chat answer."""
    record = _object(data, "ChatReply")
    context = record.get("context")
    return ChatReply(
        answer=_decode(str, record.get("answer"), "ChatReply.answer"),
        ids=_decode(list[str], record.get("ids"), "ChatReply.ids"),
        context=None if context is None else context_from_wire(context),
        activation=_decode(str | None, record.get("activation"), "ChatReply.activation"),
    )


# -- the decoder ---------------------------------------------------------------------------------


#: Each dataclass's fields and their resolved types (resolving is slow; racing threads compute the
#: same value, so no lock is needed).
_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(kind: type[Any]) -> dict[str, Any]:
    """A dataclass's fields and their resolved types, in field order."""
    if kind not in _HINTS:
        resolved = get_type_hints(kind)
        _HINTS[kind] = {f.name: resolved[f.name] for f in fields(kind)}
    return _HINTS[kind]


def _object(data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise WireError(f"{where} is not an object")
    return data


#: A compiled reader of one type: ``(value, where) -> decoded``, raising ``WireError`` at ``where``.
Decoder = Callable[[object, str], Any]
#: Each type's reader, compiled once (looking a hint's shape up on every value was most of the
#: time a client spent reading a search's hits); racing threads compile the same reader.
_DECODERS: dict[Any, Decoder] = {}


def _decode(hint: Any, value: object, where: str) -> Any:
    """``value`` as type ``hint`` (the types the data model uses); ``WireError`` at ``where``."""
    return _decoder(hint)(value, where)


def _decoder(hint: Any) -> Decoder:
    """``hint``'s reader, compiled on first use (the readers of the types inside it too)."""
    found = _DECODERS.get(hint)
    if found is None:
        found = _DECODERS[hint] = _compile(hint)
    return found


def _compile(hint: Any) -> Decoder:
    """The reader of ``hint``: its shape is looked at once, here."""
    origin = get_origin(hint)
    if hint is Any:
        return lambda value, where: value
    if origin in (Union, types.UnionType):
        return _union_decoder(get_args(hint))
    if isinstance(hint, type) and is_dataclass(hint):
        return _not_null(_record_decoder(hint))
    if hint is datetime:
        return _not_null(_decode_time)
    if origin is Literal:
        return _not_null(_literal_decoder(get_args(hint)))
    if origin in (list, tuple, dict):
        return _not_null(_container_decoder(origin, get_args(hint)))
    return _not_null(_scalar_decoder(hint))


def _not_null(decoder: Decoder) -> Decoder:
    def decode(value: object, where: str) -> Any:
        if value is None:
            raise WireError(f"{where} is null")
        return decoder(value, where)

    return decode


def _union_decoder(options: tuple[Any, ...]) -> Decoder:
    """An optional value (``X | None``, the only unions the data model has)."""
    chosen = [o for o in options if o is not type(None)]
    nullable = type(None) in options

    inner = _decoder(chosen[0]) if len(chosen) == 1 else None

    def decode(value: object, where: str) -> Any:
        if value is None and nullable:
            return None
        if inner is None:
            names = " | ".join(map(str, options))
            raise WireError(f"{where}: cannot read a value of type {names}")
        return inner(value, where)

    return decode


def _literal_decoder(allowed: tuple[Any, ...]) -> Decoder:
    def decode(value: object, where: str) -> Any:
        if value not in allowed:
            raise WireError(f"{where} is {value!r}, not one of {', '.join(allowed)}")
        return value

    return decode


def _record_decoder(kind: type[Any]) -> Decoder:
    hints = _hints(kind)
    readers = [(name, _decoder(hint)) for name, hint in hints.items()]

    def decode(value: object, where: str) -> Any:
        record = _object(value, where)
        if len(record) != len(hints) or any(name not in record for name in hints):
            missing = [name for name in hints if name not in record]
            unknown = sorted(set(record) - set(hints))
            problems = [f"no {', '.join(missing)}"] if missing else []
            problems += [f"unknown {', '.join(unknown)}"] if unknown else []
            raise WireError(f"{where} has {'; '.join(problems)}")
        return kind(**{name: read(record[name], f"{where}.{name}") for name, read in readers})

    return decode


def _decode_time(value: object, where: str) -> datetime:
    if isinstance(value, bool):
        raise WireError(f"{where} is not a time")
    try:
        return parse_time(value, where)
    except ValidationError as exc:
        raise WireError(exc.message) from exc


def _container_decoder(origin: Any, args: tuple[Any, ...]) -> Decoder:
    if origin is dict:
        values = _decoder(args[1] if args else Any)

        def decode_dict(value: object, where: str) -> Any:
            record = _object(value, where)
            return {str(k): values(v, f"{where}[{k!r}]") for k, v in record.items()}

        return decode_dict
    if origin is list or args[1:] == (Ellipsis,):  # a list, or a tuple of any length
        inner = _decoder(args[0] if args else Any)
        made = list if origin is list else tuple

        def decode_sequence(value: object, where: str) -> Any:
            if not isinstance(value, list):
                raise WireError(f"{where} is not an array")
            return made(inner(v, f"{where}[{i}]") for i, v in enumerate(value))

        return decode_sequence

    each = [_decoder(a) for a in args]

    def decode_tuple(value: object, where: str) -> Any:
        if not isinstance(value, list):
            raise WireError(f"{where} is not an array")
        if len(value) != len(each):
            raise WireError(f"{where} has {len(value)} entries, not {len(each)}")
        return tuple(
            read(v, f"{where}[{i}]") for i, (read, v) in enumerate(zip(each, value, strict=True))
        )

    return decode_tuple


def _scalar_decoder(hint: Any) -> Decoder:
    name = getattr(hint, "__name__", str(hint))
    is_type = isinstance(hint, type)
    wants_bool = hint is bool

    def decode(value: object, where: str) -> Any:
        # JSON has one number type: an integral float is an int, an int is a float.
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if hint is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if is_type and isinstance(value, hint) and wants_bool == isinstance(value, bool):
            return value
        raise WireError(f"{where} is {type(value).__name__} {value!r}, not {name}")

    return decode
