"""``ArchiveStore`` for both engines: a cube's rows out of, and into, the database (the store side
of MemCubes), and its artifacts (``SQLArtifacts``).

``read_cube`` reads every row of one cube inside one read transaction (``snapshot``), so the
export is a consistent snapshot even while others write.  ``insert_cube`` writes a whole
``MemCube`` inside one write transaction through the same row writers as the store's own
writes: the cube and its owner's ``admin`` grant, items (full text and vectors included, with
fresh change sequence numbers), version snapshots, events (new ``seq``, original times),
artifact rows, and one ``import`` event.  Either all of it is stored or none of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memstrata.errors import (
    AlreadyExists,
    ConfigurationError,
    ConflictError,
    CubeNotFound,
    StorageError,
)
from memstrata.memcube import MemCube, Vectors
from memstrata.model import MemoryItem, Version
from memstrata.store import rows
from memstrata.store.sql import writes
from memstrata.store.sql.artifacts import SQLArtifacts, of_cube
from memstrata.store.sql.clauses import SELECT
from memstrata.store.sql.database import SQLDatabase
from memstrata.store.sql.dialect import Dialect
from memstrata.store.sql.items import cubes_of


class SQLArchive(SQLArtifacts, SQLDatabase):
    """``ArchiveStore``: whole cubes read and written as ``MemCube`` objects."""

    def read_cube(self, cube_id: str) -> MemCube:
        """Every row of ``cube_id`` as a ``MemCube`` (items in id order, events by ``seq``).

        ``CubeNotFound`` if there is no such cube; ``ConfigurationError`` if its vectors were not
        all written by the cube's embedder (re-embed it first).  Only reads.
        """
        d = self.dialect
        m = d.mark
        with self.snapshot() as conn:
            found = conn.execute(
                f"SELECT {rows.CUBE_COLUMNS} FROM cubes WHERE cube_id = {m}", (cube_id,)
            ).fetchone()
            if found is None:
                raise CubeNotFound(cube_id)
            cube = rows.cube_from_row(found)
            items = d.dicts(conn, f"SELECT {SELECT} FROM items i WHERE i.cube_id = {m} "
                            "ORDER BY i.id", (cube_id,))  # fmt: skip
            vector_ids, vectors = _matrix(
                cube_id, cube.embedder, self.layout.cube_vectors(conn, cube_id)
            )
            events = conn.execute(
                f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE cube_id = {m} ORDER BY seq",
                (cube_id,),
            ).fetchall()
            return MemCube(
                cube=cube,
                items=[rows.item_from_dict(r) for r in items],
                versions=_versions(d, conn, cube_id),
                vector_ids=vector_ids,
                vectors=vectors,
                events=[rows.event_from_row(r) for r in events],
                artifacts=of_cube(conn, m, self._artifact_base(), cube_id),
            )

    def check_free(self, data: MemCube) -> None:
        """``AlreadyExists`` if the cube id, an item id or an artifact id of ``data`` is taken."""
        with self.connection() as conn:
            _refuse_taken(self.dialect, conn, data)

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
        d = self.dialect
        cube, now = data.cube, time.time()
        with self.transaction() as conn:
            _refuse_taken(d, conn, data)
            if not writes.insert_cube(d, conn, cube):  # taken since the check, by another writer
                raise AlreadyExists("cube", cube.cube_id)
            conn.execute(
                writes.insert(d, "grants", writes.GRANT_COLUMNS),
                (cube.cube_id, cube.owner, "admin", cube.owner, now),
            )
            by_id = dict(zip(data.vector_ids, data.vectors, strict=True))
            vectors = [by_id.get(item.id) for item in data.items]
            self.layout.insert_items(conn, data.items, vectors, cube.embedder)
            d.executemany(conn, writes.insert(d, "item_versions", writes.VERSION_COLUMNS), [
                writes.version_row(cube.cube_id, item_id, v)
                for item_id, stored in data.versions.items()
                for v in stored
            ])  # fmt: skip
            d.executemany(conn, writes.insert(d, "events", writes.EVENT_COLUMNS),
                          [writes.event_row(cube.cube_id, e) for e in data.events])  # fmt: skip
            self._insert_artifact_rows(conn, data, artifact_paths)
            conn.execute(
                writes.insert(d, "events", ("at", "actor", "cube_id", "op", "after")),
                (now, actor or cube.owner, cube.cube_id, "import", rows.dumps(dict(note))),
            )
        self._added(cube.cube_id, len(data.items))


def _versions(d: Dialect, conn: Any, cube_id: str) -> dict[str, list[Version]]:
    return rows.versions_by_item(conn.execute(
        f"SELECT {rows.VERSION_COLUMNS} FROM item_versions v JOIN items i "
        "ON i.cube_id = v.cube_id AND i.id = v.item_id "
        f"WHERE v.cube_id = {d.mark} ORDER BY v.item_id, v.version",
        (cube_id,),
    ).fetchall())  # fmt: skip


def _matrix(
    cube_id: str, embedder: str | None, found: Sequence[tuple[str, str | None, Any]]
) -> tuple[list[str], Vectors]:
    """The cube's vectors as (ids, matrix); ``ConfigurationError`` when one is not the cube's
    embedder's, ``StorageError`` when their widths differ."""
    stray = next((r[1] for r in found if r[1] != embedder), None)
    if found and (stray is not None or embedder is None):
        raise ConfigurationError(
            f"cube {cube_id!r} holds vectors of {stray} besides {embedder}",
            hint="re-embed the cube (memstrata cubes reembed) before exporting it",
        )
    dim = len(found[0][2]) if found else rows.fingerprint_dim(embedder)
    if any(len(r[2]) != dim for r in found):
        raise StorageError(f"cube {cube_id!r} holds vectors of different lengths")
    if not found:
        return [], np.zeros((0, dim), np.float32)
    return [r[0] for r in found], np.stack([np.asarray(r[2], np.float32) for r in found])


def _refuse_taken(d: Dialect, conn: Any, data: MemCube) -> None:
    cube_id = data.cube.cube_id
    if conn.execute(f"SELECT 1 FROM cubes WHERE cube_id = {d.mark}", (cube_id,)).fetchone():
        raise AlreadyExists("cube", cube_id)
    items: list[MemoryItem] = data.items
    # An item id is checked free in every cube (the id → cube lookup): ids stay unique across
    # the database, so an id names one item wherever it is asked for by id alone.
    item_ids = [i.id for i in items]
    held = cubes_of(d, conn, item_ids) if item_ids else {}
    for kind, taken in (
        ("item", next((i for i in sorted(item_ids) if i in held), None)),
        ("artifact", _taken(d, conn, "artifacts", "artifact_id",
                            [a.artifact_id for a in data.artifacts])),
    ):  # fmt: skip
        if taken is not None:
            error = AlreadyExists(kind, taken)
            hint = "import with keep_ids=False (memstrata import --remap-ids) to give them new ids"
            ConflictError.__init__(error, f"{kind} {taken!r} is already stored", hint=hint)
            raise error


def _taken(d: Dialect, conn: Any, table: str, column: str, ids: Sequence[str]) -> str | None:
    """The first of ``ids`` already in ``table.column``, or None."""
    if not ids:
        return None
    among, param = d.among(column, ids)
    row = conn.execute(
        f"SELECT {column} FROM {table} WHERE {among} ORDER BY {column} LIMIT 1", (param,)
    ).fetchone()
    return None if row is None else str(row[0])
