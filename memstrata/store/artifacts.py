"""A cube's artifacts (DESIGN §6), for both engines: files written whole or not at all, rows
beside them, both removed together.

Both engines keep an artifact's bytes in a file under the store's artifact folder
(``ArchiveStore.artifact_dir``) and its description in the ``artifacts`` table.
``ArtifactRows`` is ``ArchiveStore``'s artifact calls, mixed into both engines' archive class
(they differ only in their parameter ``MARK``, ``?`` or ``%s``), so an artifact is written, read
and removed one way only.  It also keeps the key the core seals artifacts with
(``artifact_key``, a ``meta`` row: the database is what every process of a server shares).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from memstrata.errors import CubeNotFound
from memstrata.memcube import Artifact
from memstrata.model import new_id
from memstrata.store import rows

#: The ``meta`` row holding ``ArtifactRows.artifact_key`` (hex).
KEY_META = "artifact_key"


class Engine(Protocol):
    """What ``ArtifactRows`` needs of the engine class it is mixed into."""

    #: the engine's parameter mark (``?`` or ``%s``)
    MARK: str

    def transaction(self) -> AbstractContextManager[Any]: ...

    def snapshot(self) -> AbstractContextManager[Any]: ...

    def artifact_dir(self, cube_id: str) -> Path: ...

    def _artifact_base(self) -> Path: ...


class ArtifactRows:
    """``ArchiveStore``'s artifact calls (see there), mixed into both engines' archive class."""

    def put_artifact(
        self: Engine,
        cube_id: str,
        kind: str,
        fingerprint: str,
        data: bytes,
        metadata: Mapping[str, Any],
    ) -> Artifact:
        # The file first (written aside, renamed), then its row; the file goes if the row fails.
        with self.snapshot() as conn:
            found = conn.execute(f"SELECT 1 FROM cubes WHERE cube_id = {self.MARK}", (cube_id,))
            if not found.fetchone():
                raise CubeNotFound(cube_id)
        artifact_id = new_id()
        path, sha256, size = write(self.artifact_dir(cube_id), artifact_id, data)
        artifact = Artifact(artifact_id, kind, fingerprint, path, sha256, size, dict(metadata))
        marks = ", ".join([self.MARK] * 9)
        try:
            with self.transaction() as conn:
                conn.execute(
                    f"INSERT INTO artifacts ({rows.ARTIFACT_COLUMNS}, cube_id) VALUES ({marks})",
                    (*rows.artifact_row(artifact, _row_path(path, self._artifact_base())), cube_id),
                )
        except BaseException:
            remove([path])
            raise
        return artifact

    def artifacts(self: Engine, cube_id: str, kind: str | None = None) -> list[Artifact]:
        with self.snapshot() as conn:
            found = of_cube(conn, self.MARK, self._artifact_base(), cube_id)
        return [a for a in found if kind is None or a.kind == kind]

    def artifact_key(self: Engine) -> bytes:
        read = f"SELECT value FROM meta WHERE key = {self.MARK}"
        with self.snapshot() as conn:
            found = conn.execute(read, (KEY_META,)).fetchone()
        if found is None:
            # Made once: two processes racing both insert, the first row wins (DO NOTHING) and
            # both read it back, so every process seals with the same key.
            with self.transaction() as conn:
                conn.execute(
                    f"INSERT INTO meta (key, value) VALUES ({self.MARK}, {self.MARK}) "
                    "ON CONFLICT (key) DO NOTHING",
                    (KEY_META, secrets.token_hex(32)),
                )
                found = conn.execute(read, (KEY_META,)).fetchone()
        return bytes.fromhex(str(found[0]))

    def delete_artifacts(self: Engine, cube_id: str, artifact_ids: Sequence[str]) -> int:
        wanted = set(artifact_ids)
        with self.snapshot() as conn:
            found = of_cube(conn, self.MARK, self._artifact_base(), cube_id)
        doomed = [a for a in found if a.artifact_id in wanted]
        if not doomed:
            return 0
        with self.transaction() as conn:
            for artifact in doomed:
                conn.execute(
                    f"DELETE FROM artifacts WHERE artifact_id = {self.MARK} "
                    f"AND cube_id = {self.MARK}",
                    (artifact.artifact_id, cube_id),
                )
        remove(a.path for a in doomed)
        return len(doomed)


def of_cube(conn: Any, mark: str, base: Path, cube_id: str) -> list[Artifact]:
    """``cube_id``'s artifact rows read on ``conn``, oldest first (relative paths from ``base``)."""
    found = conn.execute(
        f"SELECT {rows.ARTIFACT_COLUMNS} FROM artifacts WHERE cube_id = {mark} "
        "ORDER BY created_at, artifact_id",
        (cube_id,),
    )
    return [rows.artifact_from_row(row, base) for row in found]


def _row_path(path: Path, base: Path) -> str:
    """``path`` as the ``artifacts.path`` column holds it: relative to ``base`` when inside it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def write(folder: Path, name: str, data: bytes) -> tuple[Path, str, int]:
    """Write ``data`` as ``folder/name`` (written aside, then renamed into place); returns the
    path, the bytes' sha256 and their size.  An existing file of that name is replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        target = folder / name
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return target, hashlib.sha256(data).hexdigest(), len(data)


def remove(paths: Iterable[Path]) -> None:
    """Delete these files; one already gone is not an error."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove_folder(folder: Path) -> None:
    """Delete ``folder`` and everything in it (a deleted cube's artifacts); absent is fine."""
    shutil.rmtree(folder, ignore_errors=True)
