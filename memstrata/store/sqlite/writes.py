"""Row writers shared by every write path; each runs on the caller's open write transaction.

One function per kind of row, so that an item added by ``add_items``, imported from a MemCube or
copied into a scratch index is laid out the same way: its row with a fresh change sequence
number, its full-text row, and its vector.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.model import Cube, MemoryItem, to_epoch
from memstrata.store import rows

_ITEM_INSERT = (
    f"INSERT INTO items ({', '.join(rows.ITEM_COLUMNS)}, seq) "
    f"VALUES ({', '.join('?' * len(rows.ITEM_COLUMNS))}, ?)"
)
ITEM_UPDATE = (
    f"UPDATE items SET {', '.join(c + ' = ?' for c in rows.ITEM_COLUMNS)}, seq = ? WHERE rid = ?"
)
VERSION_INSERT = (
    "INSERT INTO item_versions (item_id, version, snapshot, at, actor, reason) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
EVENT_INSERT = (
    "INSERT INTO events (at, actor, cube_id, item_id, op, before, after, version, reason) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def next_seq(conn: sqlite3.Connection, count: int) -> int:
    """Reserve ``count`` change sequence numbers; returns the last one.

    Every item change takes one, so a vector mirror (of this or another process) finds what
    changed since it last looked with one indexed query (see ``vectors.py``).
    """
    row = conn.execute(
        "UPDATE counters SET value = value + ? WHERE name = 'item_seq' RETURNING value", (count,)
    ).fetchone()
    return int(row[0])


def insert_items(
    conn: sqlite3.Connection,
    items: Sequence[MemoryItem],
    vectors: Sequence[npt.NDArray[Any] | None],
    embedder: str | None,
) -> None:
    """Store new items: each row (with a fresh change sequence number), its full-text row and its
    vector (``None``: the item has none), recorded as ``embedder``'s.  Versions and events are the
    caller's: a new item has a first version, an imported one brings its own.
    """
    last = next_seq(conn, len(items))
    first = last - len(items) + 1
    for seq, item, vector in zip(range(first, last + 1), items, vectors, strict=True):
        rid = conn.execute(_ITEM_INSERT, (*rows.item_to_row(item), seq)).lastrowid
        index(conn, rid, item)
        if vector is not None:
            conn.execute(
                "INSERT INTO vectors (rid, embedder, vector) VALUES (?, ?, ?)",
                (rid, embedder, np.asarray(vector, np.float32).tobytes()),
            )


def index(conn: sqlite3.Connection, rid: int | None, item: MemoryItem) -> None:
    """Write the item's full-text row (``rowid`` is the item's ``rid``)."""
    conn.execute(
        "INSERT INTO items_fts (rowid, body, cube) VALUES (?, ?, ?)",
        (rid, rows.fts_body(item), item.cube_id),
    )


def insert_cube(conn: sqlite3.Connection, cube: Cube) -> None:
    """The cube's row (no grant, no event: the caller's)."""
    conn.execute(
        f"INSERT INTO cubes ({rows.CUBE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (cube.cube_id, cube.name, cube.owner, cube.kind, rows.dumps(cube.settings),
         cube.embedder, to_epoch(cube.created_at)),
    )  # fmt: skip


def version(
    conn: sqlite3.Connection, item: MemoryItem, actor: str | None, reason: str | None
) -> None:
    """A snapshot of ``item`` as its version ``item.version``, written now."""
    snapshot = rows.dumps(rows.item_to_dict(item))
    conn.execute(VERSION_INSERT, (item.id, item.version, snapshot, time.time(), actor, reason))


def event(
    conn: sqlite3.Connection,
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
        EVENT_INSERT,
        (time.time(), actor, cube_id, item_id, op,
         None if before is None else rows.dumps(before),
         None if after is None else rows.dumps(after), version, reason),
    )  # fmt: skip
