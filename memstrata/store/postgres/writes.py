"""Row writers shared by every PostgreSQL write path; each runs on the caller's open transaction.

The same jobs as ``memstrata/store/sqlite/writes.py``: an item added, imported or copied into a
scratch index is laid out one way (its row with a fresh change sequence number, its full-text
vector and term count, its embedding); a version snapshot; an audit event.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.model import Cube, MemoryItem, to_epoch
from memstrata.store import rows
from memstrata.store.postgres import schema

#: The text search configuration: Snowball's English stemmer (FTS5's ``porter`` in SQLite).
#: Terms carry their cube's prefix (``text.index_body``), so none is taken for a stopword.
TS_CONFIG = "english"
_COLUMNS = ", ".join(rows.ITEM_COLUMNS)
_MARKS = ", ".join(["%s"] * len(rows.ITEM_COLUMNS))
_ITEM_INSERT = (
    f"INSERT INTO items ({_COLUMNS}, seq, tsv, doclen, embedder, dim, vector) "
    f"VALUES ({_MARKS}, nextval('item_seq'), to_tsvector('{TS_CONFIG}', %s), %s, %s, %s, "
    "%s::real[]::vector)"
)
ITEM_UPDATE = f"UPDATE items SET ({_COLUMNS}, seq) = ({_MARKS}, nextval('item_seq')) WHERE id = %s"
REINDEX = f"UPDATE items SET tsv = to_tsvector('{TS_CONFIG}', %s), doclen = %s WHERE id = %s"
VERSION_INSERT = (
    "INSERT INTO item_versions (item_id, version, snapshot, at, actor, reason) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
EVENT_INSERT = (
    "INSERT INTO events (at, actor, cube_id, item_id, op, before, after, version, reason) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def body(item: MemoryItem) -> tuple[str, int]:
    """The item's full-text body and its term count (BM25's document length)."""
    text = rows.fts_body(item)
    return text, len(text.split())


def vector_param(vector: npt.NDArray[Any] | None) -> list[float] | None:
    """A vector as the driver sends it (``real[]``, cast to ``vector`` in SQL)."""
    return None if vector is None else np.asarray(vector, np.float32).tolist()


def insert_items(
    conn: Any,
    items: Sequence[MemoryItem],
    vectors: Sequence[npt.NDArray[Any] | None],
    embedder: str | None,
    *,
    index: bool = True,
) -> None:
    """Store new items: each row with a fresh change sequence number, its full text and its
    vector (``None``: the item has none), recorded as ``embedder``'s.  Versions and events are
    the caller's.  The HNSW index of a width seen for the first time is created here (unless
    ``index`` is false: a scratch copy is scanned exactly)."""
    params = []
    widths = set()
    for item, vector in zip(items, vectors, strict=True):
        text, length = body(item)
        dim = None if vector is None else int(np.asarray(vector).shape[0])
        if dim is not None:
            widths.add(dim)
        params.append(
            (*rows.item_to_row(item), text, length, None if dim is None else embedder, dim,
             vector_param(vector))
        )  # fmt: skip
    with conn.cursor() as cursor:
        cursor.executemany(_ITEM_INSERT, params)
    for dim in widths if index else ():
        ensure_index(conn, dim)


def ensure_index(conn: Any, dim: int) -> None:
    """The HNSW index for vectors of width ``dim``, once ``schema.HNSW_MIN_ROWS`` of them are
    stored and if it is not there yet (built in bulk, inside the caller's transaction)."""
    statement = schema.hnsw_index(dim)
    if statement is None:
        return
    if conn.execute("SELECT to_regclass(%s)", (f"items_hnsw_{dim}",)).fetchone()[0] is not None:
        return
    counted = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM items WHERE dim = %s LIMIT %s) AS w",
        (dim, schema.HNSW_MIN_ROWS),
    ).fetchone()[0]
    if counted >= schema.HNSW_MIN_ROWS:
        conn.execute(statement)


def insert_cube(conn: Any, cube: Cube) -> bool:
    """The cube's row (no grant, no event: the caller's); False, writing nothing, when its id is
    taken (also by a concurrent writer: the caller raises ``AlreadyExists``)."""
    return bool(
        conn.execute(
            f"INSERT INTO cubes ({rows.CUBE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (cube_id) DO NOTHING",
            (cube.cube_id, cube.name, cube.owner, cube.kind, rows.dumps(cube.settings),
             cube.embedder, to_epoch(cube.created_at)),
        ).rowcount
    )  # fmt: skip


def version(conn: Any, item: MemoryItem, actor: str | None, reason: str | None) -> None:
    """A snapshot of ``item`` as its version ``item.version``, written now."""
    snapshot = rows.dumps(rows.item_to_dict(item))
    conn.execute(VERSION_INSERT, (item.id, item.version, snapshot, time.time(), actor, reason))


def created(conn: Any, items: Sequence[MemoryItem]) -> None:
    """New items' first versions and ``create`` events, in two batched statements."""
    now = time.time()
    with conn.cursor() as cursor:
        cursor.executemany(VERSION_INSERT, [
            (item.id, item.version, rows.dumps(rows.item_to_dict(item)), now, item.user_id, None)
            for item in items
        ])  # fmt: skip
        cursor.executemany(EVENT_INSERT, [
            (now, item.user_id, item.cube_id, item.id, "create", None,
             rows.dumps({"tier": item.tier, "type": item.type, "session_id": item.session_id}),
             1, None)
            for item in items
        ])  # fmt: skip


def event(
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
        EVENT_INSERT,
        (time.time(), actor, cube_id, item_id, op,
         None if before is None else rows.dumps(before),
         None if after is None else rows.dumps(after), version, reason),
    )  # fmt: skip
