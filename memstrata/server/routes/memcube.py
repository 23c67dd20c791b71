"""MemCube export and import over HTTP: ``/mem_cubes/{cube_id}/export``, ``/mem_cubes/import``.

Thin adapters over ``MemoryOS.export`` and ``MemoryOS.import_cube`` (docs/memcube.md).  The
server never reads or writes a path a client names: an export is written into a new temporary
directory and streamed back; an upload is copied into one and imported from there.  No error
names those paths (``_hiding``).  An upload is a request body like any other, so
``max_request_bytes`` (413) bounds it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, BinaryIO

from fastapi import File, Form, UploadFile
from fastapi.responses import StreamingResponse

from memstrata.errors import MemCubeError
from memstrata.model import Cube
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import JSON_ERRORS, make_router

router = make_router("cubes")

GZIP = "application/gzip"
#: How many bytes of an export one piece of the response holds.
CHUNK = 1 << 20
_ARCHIVE = "cube.tar.gz"
_EXPORTED = {
    "description": "The MemCube as a gzipped tar (`memstrata import` or `/mem_cubes/import` read it)",
    "content": {GZIP: {"schema": {"type": "string", "format": "binary"}}},
}


@router.post(
    "/mem_cubes/{cube_id}/export",
    response_class=StreamingResponse,
    responses={**JSON_ERRORS, 200: _EXPORTED},
    summary="Download a cube as a MemCube .tar.gz (needs admin)",
)
def export(cube_id: str, memory: Memory, user: Caller, artifacts: bool = True) -> StreamingResponse:
    """Every item with every version, the vectors, the audit events and the artifacts (unless
    ``artifacts=false``: KV caches and adapters are large and model-specific), read in one
    consistent snapshot.  Needs admin on the cube: an export shows more than read does."""
    folder = Path(tempfile.mkdtemp(prefix="memstrata-export-"))
    try:
        with _hiding(folder / _ARCHIVE, "a temporary file"):
            memory.export(cube_id, folder / _ARCHIVE, user_id=user.user_id, artifacts=artifacts)
        archive = open(folder / _ARCHIVE, "rb")  # noqa: SIM115 - closed by _pieces
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    # Removed while open (POSIX keeps the data until the file is closed), so that nothing is left
    # behind when the client goes away before the stream starts; elsewhere _pieces removes it.
    shutil.rmtree(folder, ignore_errors=True)
    name = re.sub(r"[^A-Za-z0-9_.@-]", "_", cube_id)
    headers = {
        "Content-Disposition": f'attachment; filename="{name}.tar.gz"',
        "Content-Length": str(os.fstat(archive.fileno()).st_size),
    }
    return StreamingResponse(_pieces(archive, folder), media_type=GZIP, headers=headers)


def _pieces(archive: BinaryIO, folder: Path) -> Iterator[bytes]:
    """The archive's bytes; the file is closed (and its folder removed) when the stream ends."""
    try:
        with archive:
            while piece := archive.read(CHUNK):
                yield piece
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@router.post("/mem_cubes/import", status_code=201, summary="Upload a MemCube .tar.gz as a new cube")
def import_memcube(
    file: Annotated[UploadFile, File(description="A MemCube .tar.gz, as /export makes it.")],
    memory: Memory,
    user: Caller,
    cube_id: Annotated[
        str | None, Form(description="Default: the exported id; a new one with remap_ids.")
    ] = None,
    remap_ids: Annotated[
        bool, Form(description="Give every item a new id (to import a copy beside the original).")
    ] = False,
    reembed: Annotated[
        bool, Form(description="Recompute the vectors (needed when the embedder differs).")
    ] = False,
) -> Cube:
    """The caller owns the new cube (with admin); the source's grants are not imported.

    A corrupt, truncated or unsafe archive is a 400 ``memcube_error``, a taken cube or item id a
    409, another embedder without ``reembed`` a 400; a failed import changes nothing.
    """
    with tempfile.TemporaryDirectory(prefix="memstrata-import-") as folder:
        archive = Path(folder) / _ARCHIVE
        with open(archive, "xb") as copy:
            shutil.copyfileobj(file.file, copy)
        with _hiding(archive, "the uploaded archive"):
            return memory.import_cube(
                archive,
                owner=user.user_id,
                cube_id=cube_id or None,
                keep_ids=not remap_ids,
                reembed=reembed,
            )


@contextmanager
def _hiding(path: Path, name: str) -> Iterator[None]:
    """Re-raise a ``MemCubeError`` naming ``path`` (the server's temporary copy of an upload or
    an export) with ``name`` in its place, in the message and the hint, and the folder holding
    it as "a temporary folder": where the server keeps its files is none of a client's business.
    """
    try:
        yield
    except MemCubeError as exc:

        def hide(text: str) -> str:
            return text.replace(str(path), name).replace(str(path.parent), "a temporary folder")

        hint = None if exc.hint is None else hide(exc.hint)
        raise MemCubeError(hide(exc.message), hint=hint) from exc
