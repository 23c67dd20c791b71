"""How the CLI shows things: aligned text lines, or JSON (pure functions, no I/O)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from memstrata.memcube import Artifact
from memstrata.model import ApiKey, Cube, Hit, MemoryItem, User, Version
from memstrata.wire import part_text, scored_hit_to_wire, to_wire

TEXT_WIDTH = 100


def to_json(value: object) -> str:
    """``value`` as indented JSON in ``memstrata.wire``'s shapes (records of every field, times
    as ISO 8601, a hit as ``{"item", "score", "ranks", "parts"}``; ``hits_json`` leaves the
    parts out unless asked)."""
    return json.dumps(to_wire(value), ensure_ascii=False, indent=2)


def key_record(key: ApiKey) -> dict[str, Any]:
    """A key's record without its secret (the store keeps none to show)."""
    record: dict[str, Any] = to_wire(key)
    del record["secret"]
    return record


def table(rows: Iterable[Sequence[str]]) -> list[str]:
    """One line per row, every column but the last padded to its widest cell."""
    grid = [list(row) for row in rows]
    widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]) - 1)] if grid else []
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]])
        for row in grid
    ]


def iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def short(text: str, width: int = TEXT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def user_row(user: User) -> tuple[str, ...]:
    return (user.user_id, user.role, user.name or "-")


def key_row(key: ApiKey) -> tuple[str, ...]:
    state = (
        "revoked " + key.revoked_at.isoformat(timespec="seconds") if key.revoked_at else "active"
    )
    return (key.key_id, state, key.label or "-")


def cube_row(cube: Cube) -> tuple[str, ...]:
    return (cube.cube_id, cube.kind, cube.owner, cube.name)


def artifact_row(artifact: Artifact) -> tuple[str, ...]:
    tokens = artifact.metadata.get("tokens")
    size = "-" if artifact.size_bytes is None else f"{artifact.size_bytes / 1e6:.1f} MB"
    return (artifact.artifact_id, artifact.kind, size, f"{tokens} tokens" if tokens else "-",
            artifact.created_at.isoformat(timespec="seconds"))  # fmt: skip


def who(item: MemoryItem) -> str:
    """Who said it; for a derived item (a fact, a topic segment…) its kind in parentheses."""
    if item.type != "turn":
        return f"({'topic' if item.type == 'segment' else item.type})"
    return item.speaker or item.role or "-"


def hit_row(hit: Hit) -> tuple[str, ...]:
    item = hit.item
    return (f"{hit.score:.4f}", item.id, iso(item.event_time), who(item), short(item.text))


def hit_lines(hits: Sequence[Hit], *, explain: bool = False) -> list[str]:
    """The hits as a table of ``hit_row``s; with ``explain``, under each row one indented line
    of its parts (``keyword #2 +0.0417 · dense #1 +0.0476 · neighbour +0.0200 (next turn of
    #2)``), or ``(no parts recorded)`` for a hit that has none."""
    rows = table(map(hit_row, hits))
    if not explain:
        return rows
    lines: list[str] = []
    for row, hit in zip(rows, hits, strict=True):
        lines += [row, "    " + (" · ".join(map(part_text, hit.parts)) or "(no parts recorded)")]
    return lines


def hits_json(hits: Sequence[Hit], *, explain: bool = False) -> list[dict[str, Any]]:
    """The hits as ``--json`` shows them: scored hits, with their ``parts`` only on ``explain``."""
    return [scored_hit_to_wire(h, parts=explain) for h in hits]


def version_row(version: Version) -> tuple[str, ...]:
    text = short(version.item.text) + (f"  ({version.reason})" if version.reason else "")
    return (
        f"v{version.version}",
        iso(version.at),
        version.actor or "-",
        version.item.status,
        text,
    )


def item_lines(item: MemoryItem) -> list[str]:
    shown = {
        "id": item.id,
        "cube": item.cube_id,
        "version": str(item.version),
        "status": item.status,
        "tier/type": f"{item.tier}/{item.type}",
        "session": item.session_id,
        "speaker": item.speaker,
        "role": item.role,
        "when": iso(item.event_time),
        "updated": iso(item.updated_at),
        "metadata": json.dumps(item.metadata, ensure_ascii=False) if item.metadata else None,
        "text": item.text,
    }
    return table((f"{key}:", value) for key, value in shown.items() if value is not None)
