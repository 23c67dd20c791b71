"""SQLite's own rows of an item, each writer running on the caller's open write transaction.

The shared layer (``store/sql/``) writes what both engines lay out alike; here is what only
SQLite does: an item's row takes its change sequence number from the ``counters`` table, its
full text is a row of ``items_fts`` (``rowid`` = the item's ``rid``) and its vector a row of
``vectors`` (float32 bytes).  ``SQLiteStore``'s hooks call these.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.errors import StorageError
from memstrata.model import MemoryItem
from memstrata.store import rows
from memstrata.store.sql.erasure import ERASED
from memstrata.store.sqlite.connection import DIALECT

_ITEM_INSERT = (
    f"INSERT INTO items ({', '.join(rows.ITEM_COLUMNS)}, seq) "
    f"VALUES ({DIALECT.marks(len(rows.ITEM_COLUMNS))}, ?)"
)
_ITEM_UPDATE = (
    f"UPDATE items SET {', '.join(c + ' = ?' for c in rows.ITEM_COLUMNS)}, seq = ? WHERE rid = ?"
)
_ERASE = f"UPDATE items SET {ERASED}, updated_at = ?, seq = ? WHERE rid = ?"
_OPTIMIZE = "INSERT INTO items_fts (items_fts) VALUES ('optimize')"


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
    """Each item's row (with a fresh change sequence number), its full-text row and its vector
    (``None``: the item has none), recorded as ``embedder``'s."""
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


def rewrite(
    conn: sqlite3.Connection, old: MemoryItem, new: MemoryItem, vector: npt.NDArray[Any] | None
) -> None:
    """Overwrite the item's row with ``new`` (a fresh change sequence number), re-indexing its
    words only when they changed, and its vector when one is given."""
    rid = conn.execute(
        "SELECT rid FROM items WHERE cube_id = ? AND id = ?", (old.cube_id, old.id)
    ).fetchone()[0]
    conn.execute(_ITEM_UPDATE, (*rows.item_to_row(new), next_seq(conn, 1), rid))
    if rows.fts_body(new) != rows.fts_body(old):
        conn.execute("DELETE FROM items_fts WHERE rowid = ?", (rid,))
        index(conn, rid, new)
    if vector is not None:
        conn.execute(
            "UPDATE vectors SET vector = ? WHERE rid = ?",
            (np.asarray(vector, np.float32).tobytes(), rid),
        )


def tombstone(conn: sqlite3.Connection, item_ids: Sequence[str], cube_ids: Sequence[str]) -> None:
    """Blank these items of these cubes (``ERASED``), each with a fresh change sequence number,
    drop their full-text and vector rows, and optimise the full-text index so no old segment
    keeps the words."""
    among, param = DIALECT.among("id", item_ids)
    cubes, cube_param = DIALECT.among("cube_id", cube_ids)
    found = conn.execute(f"SELECT rid FROM items WHERE {cubes} AND {among}", (cube_param, param))
    rids = [r[0] for r in found]
    in_rids = "IN (SELECT value FROM json_each(?))"
    conn.execute(f"DELETE FROM items_fts WHERE rowid {in_rids}", (rows.dumps(rids),))
    conn.execute(f"DELETE FROM vectors WHERE rid {in_rids}", (rows.dumps(rids),))
    seq = next_seq(conn, len(rids))
    now = time.time()
    conn.executemany(_ERASE, [(now, seq - n, rid) for n, rid in enumerate(rids)])
    conn.execute(_OPTIMIZE)


def drop_cube_rows(conn: sqlite3.Connection, cube_id: str) -> None:
    """Drop the full-text and vector rows of the cube's items, and optimise the full text."""
    in_cube = "SELECT rid FROM items WHERE cube_id = ?"
    conn.execute(f"DELETE FROM items_fts WHERE rowid IN ({in_cube})", (cube_id,))
    conn.execute(f"DELETE FROM vectors WHERE rid IN ({in_cube})", (cube_id,))
    conn.execute(_OPTIMIZE)


def cube_vectors(
    conn: sqlite3.Connection, cube_id: str
) -> list[tuple[str, str | None, npt.NDArray[Any]]]:
    """(item id, embedder, vector) of the cube's items with a vector, by id."""
    found = conn.execute(
        "SELECT i.id, v.embedder, v.vector FROM items i JOIN vectors v ON v.rid = i.rid "
        "WHERE i.cube_id = ? ORDER BY i.id",
        (cube_id,),
    )
    out = []
    for item_id, embedder, blob in found:
        if len(blob) % 4:
            raise StorageError(f"cube {cube_id!r} holds a vector of {len(blob)} bytes")
        out.append((item_id, embedder, np.frombuffer(blob, dtype=np.float32)))
    return out
