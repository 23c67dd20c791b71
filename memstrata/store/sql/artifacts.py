"""``ArchiveStore``'s artifact calls for both engines: an artifact's bytes in a file under the
store's artifact folder (``artifact_dir``, the engine's), its description in the ``artifacts``
table; files written whole or not at all, rows beside them, both removed together.  Also the key
the core seals artifacts with (``artifact_key``, a ``meta`` row: the database is what every
process of a server shares).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memstrata.errors import CubeNotFound
from memstrata.memcube import Artifact, MemCube
from memstrata.model import new_id
from memstrata.store import rows
from memstrata.store.artifacts import KEY_META, remove, write
from memstrata.store.sql import writes
from memstrata.store.sql.database import SQLDatabase

_COLUMNS = (*rows.ARTIFACT_COLUMNS.split(", "), "cube_id")


class SQLArtifacts(SQLDatabase):
    """``ArchiveStore``'s artifact calls (see there)."""

    def put_artifact(
        self,
        cube_id: str,
        kind: str,
        fingerprint: str,
        data: bytes,
        metadata: Mapping[str, Any],
    ) -> Artifact:
        d = self.dialect
        # The file first (written aside, renamed), then its row; the file goes if the row fails.
        if self.row(f"SELECT 1 FROM cubes WHERE cube_id = {d.mark}", (cube_id,)) is None:
            raise CubeNotFound(cube_id)
        artifact_id = new_id()
        path, sha256, size = write(self.artifact_dir(cube_id), artifact_id, data)
        artifact = Artifact(artifact_id, kind, fingerprint, path, sha256, size, dict(metadata))
        try:
            with self.transaction() as conn:
                conn.execute(
                    writes.insert(d, "artifacts", _COLUMNS),
                    (*rows.artifact_row(artifact, _row_path(path, self._artifact_base())), cube_id),
                )
        except BaseException:
            remove([path])
            raise
        return artifact

    def artifacts(self, cube_id: str, kind: str | None = None) -> list[Artifact]:
        with self.connection() as conn:
            found = of_cube(conn, self.dialect.mark, self._artifact_base(), cube_id)
        return [a for a in found if kind is None or a.kind == kind]

    def artifact_key(self) -> bytes:
        found = self.get_meta(KEY_META)
        if found is None:
            # Made once: two processes racing both insert, the first row wins (DO NOTHING) and
            # both read it back, so every process seals with the same key.
            statement = self.dialect.upsert("meta", ("key", "value"), ("key",), None)
            with self.transaction() as conn:
                conn.execute(statement, (KEY_META, secrets.token_hex(32)))
            found = self.get_meta(KEY_META)
        return bytes.fromhex(str(found))

    def delete_artifacts(self, cube_id: str, artifact_ids: Sequence[str]) -> int:
        m = self.dialect.mark
        wanted = set(artifact_ids)
        doomed = [a for a in self.artifacts(cube_id) if a.artifact_id in wanted]
        if not doomed:
            return 0
        with self.transaction() as conn:
            for artifact in doomed:
                conn.execute(
                    f"DELETE FROM artifacts WHERE artifact_id = {m} AND cube_id = {m}",
                    (artifact.artifact_id, cube_id),
                )
        remove(a.path for a in doomed)
        return len(doomed)

    def _insert_artifact_rows(
        self, conn: Any, data: MemCube, artifact_paths: Mapping[str, str]
    ) -> None:
        """The rows of ``data``'s artifacts, their files at ``artifact_paths`` (by id)."""
        self.dialect.executemany(conn, writes.insert(self.dialect, "artifacts", _COLUMNS), [
            (*rows.artifact_row(a, artifact_paths[a.artifact_id]), data.cube.cube_id)
            for a in data.artifacts
        ])  # fmt: skip


def of_cube(conn: Any, mark: str, base: Path, cube_id: str) -> list[Artifact]:
    """``cube_id``'s artifact rows read on ``conn``, oldest first (relative paths from ``base``)."""
    found = conn.execute(
        f"SELECT {rows.ARTIFACT_COLUMNS} FROM artifacts WHERE cube_id = {mark} "
        "ORDER BY created_at, artifact_id",
        (cube_id,),
    ).fetchall()
    return [rows.artifact_from_row(row, base) for row in found]


def _row_path(path: Path, base: Path) -> str:
    """``path`` as the ``artifacts.path`` column holds it: relative to ``base`` when inside it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
