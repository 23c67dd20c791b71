"""``ArchiveStore``: a cube's rows out of, and into, the database (the store side of MemCubes).

``read_cube`` reads every row of one cube inside one read transaction, so the export is a
consistent snapshot even while others write.  ``insert_cube`` writes a whole ``MemCube`` inside
one write transaction, through the same row writers as the store's own writes (``writes.py``):
the cube and its owner's ``admin`` grant, items (full-text rows and vectors included, with
fresh change sequence numbers so every process's vector mirror picks them up), version
snapshots, events (new ``seq``, original times), artifact rows, and one ``import`` event.
Either all of it is stored or none of it.

Artifact files live beside the database: ``<db file>.artifacts/<cube_id>/``; a relative
``artifacts.path`` is relative to the database file's directory.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
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
from memstrata.memcube import MemCube, Vectors
from memstrata.model import Event, MemoryItem, Version, to_epoch
from memstrata.store import rows
from memstrata.store.artifacts import ArtifactRows, of_cube
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import SQLiteDatabase


class SQLiteArchive(SQLiteDatabase, ArtifactRows):
    """``ArchiveStore``: whole cubes read and written as ``MemCube`` objects."""

    MARK = "?"

    def artifact_dir(self, cube_id: str) -> Path:
        """Where the files of ``cube_id``'s imported artifacts go; ``MemCubeError`` for a database
        that lives in memory."""
        if self._in_memory:
            raise MemCubeError("artifacts need a database file, not ':memory:'")
        db = Path(self.path)
        return db.parent / f"{db.name}.artifacts" / cube_id

    def read_cube(self, cube_id: str) -> MemCube:
        """Every row of ``cube_id`` as a ``MemCube`` (items in id order, events by ``seq``).

        ``CubeNotFound`` if there is no such cube; ``ConfigurationError`` if its vectors were not
        all written by the cube's embedder (re-embed it first).  Only reads.
        """
        with self.snapshot() as conn:
            found = conn.execute(
                f"SELECT {rows.CUBE_COLUMNS} FROM cubes WHERE cube_id = ?", (cube_id,)
            ).fetchone()
            if found is None:
                raise CubeNotFound(cube_id)
            cube = rows.cube_from_row(found)
            vector_ids, vectors = _vectors(conn, cube_id, cube.embedder)
            return MemCube(
                cube=cube,
                items=_items(conn, cube_id),
                versions=_versions(conn, cube_id),
                vector_ids=vector_ids,
                vectors=vectors,
                events=_events(conn, cube_id),
                artifacts=of_cube(conn, self.MARK, self._artifact_base(), cube_id),
            )

    def check_free(self, data: MemCube) -> None:
        """``AlreadyExists`` if the cube id, an item id or an artifact id of ``data`` is taken."""
        _refuse_taken(self.reader(), data)

    def insert_cube(
        self,
        data: MemCube,
        *,
        artifact_paths: Mapping[str, str],
        note: Mapping[str, Any],
        actor: str | None = None,
    ) -> None:
        """Store ``data`` as a new cube owned by ``data.cube.owner``, in one transaction.

        The owner gets ``admin``; the vectors are recorded as ``data.cube.embedder``'s;
        ``artifact_paths`` gives each artifact's stored file path.  One ``import`` event (by
        ``actor``, default the owner; payload ``note``) is appended after the imported events.
        ``AlreadyExists`` if the cube id, an item id or an artifact id is taken; nothing is
        stored then.
        """
        cube, now = data.cube, time.time()
        with self.transaction() as conn:
            _refuse_taken(conn, data)
            writes.insert_cube(conn, cube)
            conn.execute(
                "INSERT INTO grants (cube_id, user_id, permission, granted_by, granted_at) "
                "VALUES (?, ?, 'admin', ?, ?)",
                (cube.cube_id, cube.owner, cube.owner, now),
            )
            by_id = dict(zip(data.vector_ids, data.vectors, strict=True))
            vectors = [by_id.get(item.id) for item in data.items]
            writes.insert_items(conn, data.items, vectors, cube.embedder)
            _insert_history(conn, data)
            _insert_artifacts(conn, data, artifact_paths)
            conn.execute(
                "INSERT INTO events (at, actor, cube_id, op, after) VALUES (?, ?, ?, 'import', ?)",
                (now, actor or cube.owner, cube.cube_id, rows.dumps(dict(note))),
            )
        self._added_since[cube.cube_id] += len(data.items)

    def _artifact_base(self) -> Path:
        """The directory relative artifact paths are relative to."""
        return Path.cwd() if self._in_memory else Path(self.path).parent


# -- reading ---------------------------------------------------------------------------------


def _items(conn: sqlite3.Connection, cube_id: str) -> list[MemoryItem]:
    sql = "SELECT * FROM items WHERE cube_id = ? ORDER BY id"
    return [rows.item_from_dict(r) for r in conn.execute(sql, (cube_id,))]


def _events(conn: sqlite3.Connection, cube_id: str) -> list[Event]:
    sql = f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE cube_id = ? ORDER BY seq"
    return [rows.event_from_row(r) for r in conn.execute(sql, (cube_id,))]


def _versions(conn: Any, cube_id: str) -> dict[str, list[Version]]:
    return rows.versions_by_item(conn.execute(
        f"SELECT {rows.VERSION_COLUMNS} FROM item_versions v JOIN items i ON i.id = v.item_id "
        "WHERE i.cube_id = ? ORDER BY v.item_id, v.version",
        (cube_id,),
    ))  # fmt: skip


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
    dim = len(found[0][2]) // 4 if found else rows.fingerprint_dim(embedder)
    if any(len(r[2]) != 4 * dim for r in found):
        raise StorageError(f"cube {cube_id!r} holds vectors of different lengths")
    matrix = np.frombuffer(b"".join(r[2] for r in found), dtype=np.float32)
    return [r[0] for r in found], matrix.reshape(len(found), dim)


# -- writing ---------------------------------------------------------------------------------


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


def _insert_history(conn: sqlite3.Connection, data: MemCube) -> None:
    """Version snapshots and events as the store writes its own, at their original times."""
    conn.executemany(
        writes.VERSION_INSERT,
        [
            (item_id, v.version, rows.dumps(rows.item_to_dict(v.item)), to_epoch(v.at),
             v.actor, v.reason)
            for item_id, stored in data.versions.items()
            for v in stored
        ],
    )  # fmt: skip
    conn.executemany(
        writes.EVENT_INSERT,
        [
            (to_epoch(e.at), e.actor, data.cube.cube_id, e.item_id, e.op,
             None if e.before is None else rows.dumps(e.before),
             None if e.after is None else rows.dumps(e.after), e.version, e.reason)
            for e in data.events
        ],
    )  # fmt: skip


def _insert_artifacts(
    conn: sqlite3.Connection, data: MemCube, artifact_paths: Mapping[str, str]
) -> None:
    conn.executemany(
        f"INSERT INTO artifacts ({rows.ARTIFACT_COLUMNS}, cube_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (*rows.artifact_row(a, artifact_paths[a.artifact_id]), data.cube.cube_id)
            for a in data.artifacts
        ],
    )  # fmt: skip
