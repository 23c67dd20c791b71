"""A cube's artifact files, for both engines: written whole or not at all
(``write``), removed (``remove``, ``remove_folder``).

Both engines keep an artifact's bytes in a file under the store's artifact folder
(``ArchiveStore.artifact_dir``) and its description in the ``artifacts`` table; the rows are
``store/sql/artifacts.py``'s.  ``KEY_META`` names the ``meta`` row of the key the core seals
artifacts with (``ArchiveStore.artifact_key``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

#: The ``meta`` row holding ``ArchiveStore.artifact_key`` (hex).
KEY_META = "artifact_key"


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
