"""A cube's rows out of, and into, a ``SQLiteStore``: the database side of MemCube export/import.

``read_cube`` reads every row of one cube inside one read transaction, so the export is a
consistent snapshot even while others write.  ``insert_cube`` writes a whole ``MemCube`` inside
one write transaction, exactly as the store's own writes lay rows out: the cube and its owner's
``admin`` grant, items (with full-text rows as ``SQLiteStore`` indexes them, and change
sequence numbers taken from the ``item_seq`` counter so every process's vector mirror picks the
new rows up), vectors as float32 BLOBs, version snapshots, events (new ``seq``, original times),
artifact rows, and one ``import`` event.  Either all of it is stored or none of it.

Artifact files live beside the database: ``<db file>.artifacts/<cube_id>/``; a relative
``artifacts.path`` is relative to the database file's directory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.errors import (
    AlreadyExists,
    ConfigurationError,
    ConflictError,
    CubeNotFound,
    MemCubeError,
    StorageError,
)
from memstrata.memcube import Artifact, MemCube, Vectors
from memstrata.model import Version, to_epoch
from memstrata.store.sqlite import rows
from memstrata.store.sqlite.store import SQLiteStore, fts_body

_CUBE_COLS = "cube_id, name, owner, kind, settings, embedder, created_at"
_EVENT_COLS = "seq, at, actor, cube_id, item_id, op, before, after, version, reason"
_ARTIFACT_COLS = "artifact_id, kind, path, fingerprint, sha256, size_bytes, metadata, created_at"
_ITEM_INSERT = (
    f"INSERT INTO items ({', '.join(rows.ITEM_COLUMNS)}, seq) "
    f"VALUES ({', '.join('?' * len(rows.ITEM_COLUMNS))}, ?)"
)


def artifact_dir(store: SQLiteStore, cube_id: str) -> Path:
    """Where the files of ``cube_id``'s imported artifacts go; ``MemCubeError`` for ``:memory:``."""
    if store.path == ":memory:":
        raise MemCubeError("artifacts need a database file, not ':memory:'")
    db = Path(store.path)
    return db.parent / f"{db.name}.artifacts" / cube_id


# -- reading ---------------------------------------------------------------------------------


def read_cube(store: SQLiteStore, cube_id: str) -> MemCube:
    """Every row of ``cube_id`` as a ``MemCube`` (items in id order, events by ``seq``).

    ``CubeNotFound`` if there is no such cube; ``ConfigurationError`` if its vectors were not
    all written by the cube's embedder (re-embed it first).  Only reads.
    """
    with _snapshot(store) as conn:
        row = conn.execute(f"SELECT {_CUBE_COLS} FROM cubes WHERE cube_id = ?", (cube_id,))
        found = row.fetchone()
        if found is None:
            raise CubeNotFound(cube_id)
        cube = rows.cube_from_row(found)
        items = [
            rows.item_from_dict(r)
            for r in conn.execute("SELECT * FROM items WHERE cube_id = ? ORDER BY id", (cube_id,))
        ]
        vector_ids, vectors = _vectors(conn, cube_id, cube.embedder)
        events = [
            rows.event_from_row(r)
            for r in conn.execute(
                f"SELECT {_EVENT_COLS} FROM events WHERE cube_id = ? ORDER BY seq", (cube_id,)
            )
        ]
        return MemCube(
            cube=cube,
            items=items,
            versions=_versions(conn, cube_id),
            vector_ids=vector_ids,
            vectors=vectors,
            events=events,
            artifacts=_artifacts(conn, store, cube_id),
        )


@contextmanager
def _snapshot(store: SQLiteStore) -> Iterator[sqlite3.Connection]:
    """This thread's read connection inside one read transaction (one consistent snapshot)."""
    conn = store.reader()
    if conn.in_transaction:  # the writer, inside a write transaction: already consistent
        yield conn
        return
    try:
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise StorageError(f"reading {store.path} failed: {exc}") from exc


def _versions(conn: sqlite3.Connection, cube_id: str) -> dict[str, list[Version]]:
    found: dict[str, list[Version]] = {}
    cursor = conn.execute(
        "SELECT v.item_id, v.version, v.snapshot, v.at, v.actor, v.reason FROM item_versions v "
        "JOIN items i ON i.id = v.item_id WHERE i.cube_id = ? ORDER BY v.item_id, v.version",
        (cube_id,),
    )
    for item_id, version, snapshot, at, actor, reason in cursor:
        item = rows.item_from_dict(json.loads(snapshot))
        found.setdefault(item_id, []).append(
            Version(version, item, rows.to_datetime(at), actor, reason)
        )
    return found


def _vectors(
    conn: sqlite3.Connection, cube_id: str, embedder: str | None
) -> tuple[list[str], Vectors]:
    found = conn.execute(
        "SELECT i.id, v.embedder, v.vector FROM items i JOIN vectors v ON v.rid = i.rid "
        "WHERE i.cube_id = ? ORDER BY i.id",
        (cube_id,),
    ).fetchall()
    stray = next((r[1] for r in found if r[1] != embedder), None)
    if found and (stray is not None or embedder is None):
        raise ConfigurationError(
            f"cube {cube_id!r} holds vectors of {stray} besides {embedder}",
            hint="re-embed the cube (memstrata cubes reembed) before exporting it",
        )
    dim = len(found[0][2]) // 4 if found else _dim(embedder)
    if any(len(r[2]) != 4 * dim for r in found):
        raise StorageError(f"cube {cube_id!r} holds vectors of different lengths")
    matrix = np.frombuffer(b"".join(r[2] for r in found), dtype=np.float32)
    return [r[0] for r in found], matrix.reshape(len(found), dim)


def _dim(fingerprint: str | None) -> int:
    """The dimension at the end of a ``model_id/dim`` fingerprint (0 when there is none)."""
    tail = (fingerprint or "").rpartition("/")[2]
    return int(tail) if tail.isdigit() else 0


def _artifacts(conn: sqlite3.Connection, store: SQLiteStore, cube_id: str) -> list[Artifact]:
    found = conn.execute(
        f"SELECT {_ARTIFACT_COLS} FROM artifacts WHERE cube_id = ? ORDER BY created_at, artifact_id",
        (cube_id,),
    ).fetchall()
    if not found:
        return []
    base = Path.cwd() if store.path == ":memory:" else Path(store.path).parent
    return [
        Artifact(
            artifact_id=artifact_id,
            kind=kind,
            fingerprint=fingerprint,
            path=base / path,  # an absolute path stays as it is
            sha256=sha256,
            size_bytes=size_bytes,
            metadata=json.loads(metadata),
            created_at=rows.to_datetime(created_at),
        )
        for artifact_id, kind, path, fingerprint, sha256, size_bytes, metadata, created_at in found
    ]


# -- writing ---------------------------------------------------------------------------------


def check_free(store: SQLiteStore, data: MemCube) -> None:
    """``AlreadyExists`` if the cube id, an item id or an artifact id of ``data`` is taken."""
    _refuse_taken(store.reader(), data)


def _refuse_taken(conn: sqlite3.Connection, data: MemCube) -> None:
    cube_id = data.cube.cube_id
    if conn.execute("SELECT 1 FROM cubes WHERE cube_id = ?", (cube_id,)).fetchone():
        raise AlreadyExists("cube", cube_id)
    for kind, table, column, ids in (
        ("item", "items", "id", [i.id for i in data.items]),
        ("artifact", "artifacts", "artifact_id", [a.artifact_id for a in data.artifacts]),
    ):
        taken = _taken(conn, table, column, ids)
        if taken is not None:
            error = AlreadyExists(kind, taken)
            hint = "import with keep_ids=False (memstrata import --remap-ids) to give them new ids"
            ConflictError.__init__(error, f"{kind} {taken!r} is already stored", hint=hint)
            raise error


def _taken(conn: sqlite3.Connection, table: str, column: str, ids: Sequence[str]) -> str | None:
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        sql = f"SELECT {column} FROM {table} WHERE {column} IN ({', '.join('?' * len(chunk))})"
        row = conn.execute(f"{sql} ORDER BY {column} LIMIT 1", chunk).fetchone()
        if row is not None:
            return str(row[0])
    return None


def insert_cube(
    store: SQLiteStore,
    data: MemCube,
    *,
    artifact_paths: Mapping[str, str],
    note: Mapping[str, Any],
) -> None:
    """Store ``data`` as a new cube owned by ``data.cube.owner``, in one transaction.

    The owner gets ``admin``; the vectors are recorded as ``data.cube.embedder``'s;
    ``artifact_paths`` gives each artifact's stored file path.  One ``import`` event (actor:
    the owner, payload ``note``) is appended after the imported events.  ``AlreadyExists`` if
    the cube id, an item id or an artifact id is taken; nothing is stored then.
    """
    cube, now = data.cube, time.time()
    with store.transaction() as conn:
        _refuse_taken(conn, data)
        conn.execute(
            f"INSERT INTO cubes ({_CUBE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (cube.cube_id, cube.name, cube.owner, cube.kind, rows.dumps(cube.settings),
             cube.embedder, to_epoch(cube.created_at)),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO grants (cube_id, user_id, permission, granted_by, granted_at) "
            "VALUES (?, ?, 'admin', ?, ?)",
            (cube.cube_id, cube.owner, cube.owner, now),
        )
        _insert_items(conn, data)
        _insert_history(conn, data)
        conn.executemany(
            f"INSERT INTO artifacts ({_ARTIFACT_COLS}, cube_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (a.artifact_id, a.kind, artifact_paths[a.artifact_id], a.fingerprint, a.sha256,
                 a.size_bytes, rows.dumps(a.metadata), to_epoch(a.created_at), cube.cube_id)
                for a in data.artifacts
            ],
        )  # fmt: skip
        conn.execute(
            "INSERT INTO events (at, actor, cube_id, op, after) VALUES (?, ?, ?, 'import', ?)",
            (now, cube.owner, cube.cube_id, rows.dumps(dict(note))),
        )


def _insert_items(conn: sqlite3.Connection, data: MemCube) -> None:
    """Items, their full-text rows and vectors, with fresh change sequence numbers."""
    vectors = dict(zip(data.vector_ids, data.vectors, strict=True))
    count = len(data.items)
    # Reserve ``count`` numbers of the change sequence, as SQLiteStore does for its own writes.
    last = conn.execute(
        "UPDATE counters SET value = value + ? WHERE name = 'item_seq' RETURNING value", (count,)
    ).fetchone()[0]
    for seq, item in enumerate(data.items, int(last) - count + 1):
        rid = conn.execute(_ITEM_INSERT, (*rows.item_to_row(item), seq)).lastrowid
        conn.execute(
            "INSERT INTO items_fts (rowid, body, cube) VALUES (?, ?, ?)",
            (rid, fts_body(item), item.cube_id),
        )
        vector = vectors.get(item.id)
        if vector is not None:
            conn.execute(
                "INSERT INTO vectors (rid, embedder, vector) VALUES (?, ?, ?)",
                (rid, data.cube.embedder, np.asarray(vector, np.float32).tobytes()),
            )


def _insert_history(conn: sqlite3.Connection, data: MemCube) -> None:
    """Version snapshots and events, each as the store writes its own."""
    conn.executemany(
        "INSERT INTO item_versions (item_id, version, snapshot, at, actor, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (item_id, v.version, rows.dumps(rows.item_to_dict(v.item)), to_epoch(v.at),
             v.actor, v.reason)
            for item_id, stored in data.versions.items()
            for v in stored
        ],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO events (at, actor, cube_id, item_id, op, before, after, version, reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (to_epoch(e.at), e.actor, data.cube.cube_id, e.item_id, e.op,
             None if e.before is None else rows.dumps(e.before),
             None if e.after is None else rows.dumps(e.after), e.version, e.reason)
            for e in data.events
        ],
    )  # fmt: skip
