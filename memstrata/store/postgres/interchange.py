"""``ArchiveStore``: a cube's rows out of, and into, PostgreSQL (the store side of MemCubes).

As in SQLite (``memstrata/store/sqlite/interchange.py``): ``read_cube`` reads every row of one
cube inside one repeatable-read transaction (a consistent snapshot while others write);
``insert_cube`` writes a whole ``MemCube`` in one transaction through the same row writers as the
store's own writes.  Artifact files live under the store's ``artifacts_dir`` (a directory every
server process can reach, e.g. a shared volume): ``<artifacts_dir>/<cube_id>/``; without one,
a cube with artifacts can be neither exported nor imported here.
"""

from __future__ import annotations

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
from memstrata.model import Event, Version, to_epoch
from memstrata.store import rows
from memstrata.store.artifacts import ArtifactRows, of_cube
from memstrata.store.postgres import writes
from memstrata.store.postgres.connection import PostgresDatabase
from memstrata.store.postgres.items import SELECT


class PostgresArchive(PostgresDatabase, ArtifactRows):
    """``ArchiveStore``: whole cubes read and written as ``MemCube`` objects."""

    MARK = "%s"

    artifacts_dir: Path | None = None

    def artifact_dir(self, cube_id: str) -> Path:
        if self.artifacts_dir is None:
            raise MemCubeError(
                f"the store at {self.where} has no artifacts directory",
                hint="set MEMSTRATA_ARTIFACTS_DIR to a directory every server can reach",
            )
        return self.artifacts_dir / cube_id

    def _artifact_base(self) -> Path:
        """What stored artifact paths are relative to: the parent of ``artifacts_dir`` (a row
        path is ``<artifacts_dir name>/<cube_id>/<file>``, as SQLite's is relative to the
        database file's directory)."""
        return Path.cwd() if self.artifacts_dir is None else self.artifacts_dir.parent

    def read_cube(self, cube_id: str) -> MemCube:
        from psycopg.rows import dict_row

        with self.snapshot() as conn:
            found = conn.execute(
                f"SELECT {rows.CUBE_COLUMNS} FROM cubes WHERE cube_id = %s", (cube_id,)
            ).fetchone()
            if found is None:
                raise CubeNotFound(cube_id)
            cube = rows.cube_from_row(found)
            items = [
                rows.item_from_dict(r)
                for r in conn.cursor(row_factory=dict_row).execute(
                    f"SELECT {SELECT} FROM items i WHERE i.cube_id = %s ORDER BY i.id", (cube_id,)
                )
            ]
            vector_ids, vectors = _vectors(conn, cube_id, cube.embedder)
            events = [
                rows.event_from_row(r)
                for r in conn.execute(
                    f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE cube_id = %s ORDER BY seq",
                    (cube_id,),
                )
            ]
            return MemCube(
                cube=cube,
                items=items,
                versions=_versions(conn, cube_id),
                vector_ids=vector_ids,
                vectors=vectors,
                events=events,
                artifacts=of_cube(conn, self.MARK, self._artifact_base(), cube_id),
            )

    def check_free(self, data: MemCube) -> None:
        with self.connection() as conn:
            _refuse_taken(conn, data)

    def insert_cube(
        self,
        data: MemCube,
        *,
        artifact_paths: Mapping[str, str],
        note: Mapping[str, Any],
        actor: str | None = None,
    ) -> None:
        cube, now = data.cube, time.time()
        with self.transaction() as conn:
            _refuse_taken(conn, data)
            if not writes.insert_cube(conn, cube):  # taken since the check, by another writer
                raise AlreadyExists("cube", cube.cube_id)
            conn.execute(
                "INSERT INTO grants (cube_id, user_id, permission, granted_by, granted_at) "
                "VALUES (%s, %s, 'admin', %s, %s)",
                (cube.cube_id, cube.owner, cube.owner, now),
            )
            by_id = dict(zip(data.vector_ids, data.vectors, strict=True))
            vectors = [by_id.get(item.id) for item in data.items]
            writes.insert_items(conn, data.items, vectors, cube.embedder)
            with conn.cursor() as cursor:
                cursor.executemany(writes.VERSION_INSERT, [
                    (item_id, v.version, rows.dumps(rows.item_to_dict(v.item)), to_epoch(v.at),
                     v.actor, v.reason)
                    for item_id, stored in data.versions.items()
                    for v in stored
                ])  # fmt: skip
                cursor.executemany(writes.EVENT_INSERT, [_event_row(cube.cube_id, e)
                                                         for e in data.events])  # fmt: skip
                cursor.executemany(
                    f"INSERT INTO artifacts ({rows.ARTIFACT_COLUMNS}, cube_id) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [
                        (*rows.artifact_row(a, artifact_paths[a.artifact_id]), cube.cube_id)
                        for a in data.artifacts
                    ],
                )  # fmt: skip
            conn.execute(
                "INSERT INTO events (at, actor, cube_id, op, after) "
                "VALUES (%s, %s, %s, 'import', %s)",
                (now, actor or cube.owner, cube.cube_id, rows.dumps(dict(note))),
            )
        self._indexed += len(data.items)


def _event_row(cube_id: str, e: Event) -> tuple[Any, ...]:
    return (to_epoch(e.at), e.actor, cube_id, e.item_id, e.op,
            None if e.before is None else rows.dumps(e.before),
            None if e.after is None else rows.dumps(e.after), e.version, e.reason)  # fmt: skip


def _versions(conn: Any, cube_id: str) -> dict[str, list[Version]]:
    return rows.versions_by_item(conn.execute(
        f"SELECT {rows.VERSION_COLUMNS} FROM item_versions v JOIN items i ON i.id = v.item_id "
        "WHERE i.cube_id = %s ORDER BY v.item_id, v.version",
        (cube_id,),
    ))  # fmt: skip


def _vectors(conn: Any, cube_id: str, embedder: str | None) -> tuple[list[str], Vectors]:
    found = conn.execute(
        "SELECT id, embedder, vector::real[] FROM items WHERE cube_id = %s "
        "AND vector IS NOT NULL ORDER BY id",
        (cube_id,),
    ).fetchall()
    stray = next((r[1] for r in found if r[1] != embedder), None)
    if found and (stray is not None or embedder is None):
        raise ConfigurationError(
            f"cube {cube_id!r} holds vectors of {stray} besides {embedder}",
            hint="re-embed the cube (memstrata cubes reembed) before exporting it",
        )
    dim = len(found[0][2]) if found else rows.fingerprint_dim(embedder)
    if any(len(r[2]) != dim for r in found):
        raise StorageError(f"cube {cube_id!r} holds vectors of different lengths")
    matrix = np.asarray([r[2] for r in found], dtype=np.float32).reshape(len(found), dim)
    return [r[0] for r in found], matrix


def _refuse_taken(conn: Any, data: MemCube) -> None:
    cube_id = data.cube.cube_id
    if conn.execute("SELECT 1 FROM cubes WHERE cube_id = %s", (cube_id,)).fetchone():
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


def _taken(conn: Any, table: str, column: str, ids: Sequence[str]) -> str | None:
    if not ids:
        return None
    row = conn.execute(
        f"SELECT {column} FROM {table} WHERE {column} = ANY(%s) ORDER BY {column} LIMIT 1",
        (list(ids),),
    ).fetchone()
    return None if row is None else str(row[0])
