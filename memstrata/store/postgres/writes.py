"""PostgreSQL's own rows of an item, each writer running on the caller's open transaction.

The shared layer (``store/sql/``) writes what both engines lay out alike; here is what only
PostgreSQL does: an item's row takes its change sequence number from the ``item_seq`` sequence
and holds its full text (a ``tsvector`` and its term count) and its embedding (pgvector, with
its width; each width gets an HNSW index once it is common).  ``PostgresStore``'s hooks call
these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.model import MemoryItem
from memstrata.store import rows
from memstrata.store.postgres import schema
from memstrata.store.sql.erasure import ERASED

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
# Each names the item's key, (cube_id, id): a sharded PostgreSQL routes it to the cube's node.
_ITEM_UPDATE = (
    f"UPDATE items SET ({_COLUMNS}, seq) = ({_MARKS}, nextval('item_seq')) "
    "WHERE cube_id = %s AND id = %s"
)
_REINDEX = (
    f"UPDATE items SET tsv = to_tsvector('{TS_CONFIG}', %s), doclen = %s "
    "WHERE cube_id = %s AND id = %s"
)
# An erased item's full text and embedding are columns of its row: they go with its words.
_ERASE = (
    f"UPDATE items SET {ERASED}, tsv = NULL, doclen = 0, vector = NULL, dim = NULL, "
    "embedder = NULL, updated_at = extract(epoch FROM clock_timestamp()), "
    "seq = nextval('item_seq') WHERE cube_id = ANY(%s) AND id = ANY(%s)"
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


def rewrite(conn: Any, old: MemoryItem, new: MemoryItem, vector: npt.NDArray[Any] | None) -> None:
    """Overwrite the item's row with ``new`` (a fresh change sequence number), its full text only
    when the indexed words changed, its embedding when one is given."""
    key = (old.cube_id, old.id)
    conn.execute(_ITEM_UPDATE, (*rows.item_to_row(new), *key))
    if rows.fts_body(new) != rows.fts_body(old):
        conn.execute(_REINDEX, (*body(new), *key))
    if vector is not None:
        conn.execute(
            "UPDATE items SET vector = %s::real[]::vector WHERE cube_id = %s AND id = %s",
            (vector_param(vector), *key),
        )


def tombstone(conn: Any, item_ids: Sequence[str], cube_ids: Sequence[str]) -> None:
    """Blank these items of these cubes (``ERASED``), full text and embedding with them."""
    conn.execute(_ERASE, (list(cube_ids), list(item_ids)))


def cube_vectors(conn: Any, cube_id: str) -> list[tuple[str, str | None, npt.NDArray[Any]]]:
    """(item id, embedder, vector) of the cube's items with a vector, by id."""
    found = conn.execute(
        "SELECT id, embedder, vector::real[] FROM items WHERE cube_id = %s "
        "AND vector IS NOT NULL ORDER BY id",
        (cube_id,),
    ).fetchall()
    return [(r[0], r[1], np.asarray(r[2], np.float32)) for r in found]


def drop_cube_rows(conn: Any, cube_id: str) -> None:
    """Nothing: full text and embedding are columns of the items, and go with them."""
    del conn, cube_id
