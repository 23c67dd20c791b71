"""Row writers both engines share; each runs on the caller's open write transaction.

One function per kind of row that both engines lay out the same way (a cube, a version snapshot,
an audit event, the first versions and ``create`` events of new items), so a row is written one
way only whether it comes from a call, an import or a copy.  An item's own row, its full text and
its vector are the engine's (``SQLDatabase.layout``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from memstrata.model import Cube, Event, MemoryItem, Version, to_epoch
from memstrata.store import rows
from memstrata.store.sql.dialect import Dialect

VERSION_COLUMNS = ("cube_id", "item_id", "version", "snapshot", "at", "actor", "reason")
EVENT_COLUMNS = ("at", "actor", "cube_id", "item_id", "op", "before", "after", "version", "reason")
GRANT_COLUMNS = ("cube_id", "user_id", "permission", "granted_by", "granted_at")


def insert(d: Dialect, table: str, columns: Sequence[str]) -> str:
    """``INSERT INTO table (columns) VALUES (marks)``."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({d.marks(len(columns))})"


def insert_cube(d: Dialect, conn: Any, cube: Cube) -> bool:
    """The cube's row (no grant, no event: the caller's); False, writing nothing, when its id is
    taken (also by a concurrent writer: the caller raises ``AlreadyExists``)."""
    statement = d.upsert("cubes", rows.CUBE_COLUMNS.split(", "), ("cube_id",), None)
    done = conn.execute(
        statement,
        (cube.cube_id, cube.name, cube.owner, cube.kind, rows.dumps(cube.settings),
         cube.embedder, to_epoch(cube.created_at)),
    ).rowcount  # fmt: skip
    return bool(done)


def version_row(cube_id: str, item_id: str, version: Version) -> tuple[Any, ...]:
    """The ``item_versions`` row of ``version`` of item ``item_id`` of ``cube_id``, at its own
    time."""
    snapshot = rows.dumps(rows.item_to_dict(version.item))
    return (cube_id, item_id, version.version, snapshot, to_epoch(version.at), version.actor,
            version.reason)  # fmt: skip


def event_row(cube_id: str | None, event: Event) -> tuple[Any, ...]:
    """The ``events`` row of ``event`` (in ``cube_id``), at its own time (its ``seq`` is new)."""
    return (to_epoch(event.at), event.actor, cube_id, event.item_id, event.op,
            None if event.before is None else rows.dumps(event.before),
            None if event.after is None else rows.dumps(event.after), event.version,
            event.reason)  # fmt: skip


def version(d: Dialect, conn: Any, item: MemoryItem, actor: str | None, reason: str | None) -> None:
    """A snapshot of ``item`` as its version ``item.version``, written now."""
    snapshot = rows.dumps(rows.item_to_dict(item))
    conn.execute(
        insert(d, "item_versions", VERSION_COLUMNS),
        (item.cube_id, item.id, item.version, snapshot, time.time(), actor, reason),
    )


def created(d: Dialect, conn: Any, items: Sequence[MemoryItem]) -> None:
    """New items' first versions and ``create`` events, in two batched statements."""
    now = time.time()
    d.executemany(conn, insert(d, "item_versions", VERSION_COLUMNS), [
        (item.cube_id, item.id, item.version, rows.dumps(rows.item_to_dict(item)), now,
         item.user_id, None)
        for item in items
    ])  # fmt: skip
    d.executemany(conn, insert(d, "events", EVENT_COLUMNS), [
        (now, item.user_id, item.cube_id, item.id, "create", None,
         rows.dumps({"tier": item.tier, "type": item.type, "session_id": item.session_id}),
         1, None)
        for item in items
    ])  # fmt: skip


def event(
    d: Dialect,
    conn: Any,
    actor: str | None,
    cube_id: str | None,
    item_id: str | None,
    op: str,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    version: int | None = None,
    reason: str | None = None,
) -> None:
    """Append one audit event, timed now."""
    conn.execute(
        insert(d, "events", EVENT_COLUMNS),
        (time.time(), actor, cube_id, item_id, op,
         None if before is None else rows.dumps(before),
         None if after is None else rows.dumps(after), version, reason),
    )  # fmt: skip
