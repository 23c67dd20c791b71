"""MemCube files: writing a directory or a ``.tar.gz``, and reading one back, fully checked.

``write_cube`` never overwrites: it writes beside the target and moves the result into place.
``open_cube`` checks file names and types, the checksums, every field of every line (see
``records``), counts and cross-references before handing a ``MemCube`` over; a tar is unpacked
member by member by this module (no ``extractall``, no reliance on extraction filters), only the
names the format defines, only regular files, into a temporary directory.  Vectors are read with
``allow_pickle=False`` after their header is checked against the file's size.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn, cast

import numpy as np

from memstrata.errors import MemCubeError
from memstrata.memcube import records
from memstrata.memcube.records import (
    ARTIFACT_DIR,
    ARTIFACTS,
    COUNTS,
    DATA_FILES,
    EVENTS,
    FORMAT_VERSION,
    ITEMS,
    MANIFEST,
    TAR_SUFFIX,
    VECTOR_IDS,
    VECTORS,
    Artifact,
    Manifest,
    MemCube,
    Vectors,
)
from memstrata.model import MemoryItem, Version, utcnow

#: What reading a damaged archive may raise (gzip raises EOFError for a truncated stream).
_UNREADABLE = (tarfile.TarError, EOFError, zlib.error, OSError)
_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,16}$")
#: A JSON escape of a UTF-16 surrogate (D800-DFFF).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def write_cube(
    data: MemCube,
    path: str | os.PathLike[str],
    *,
    now: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Write ``data`` at ``path``: a new directory, or a gzipped tar when ``path`` ends ``.tar.gz``.

    The files are written beside ``path`` and moved into place at the end, so ``path`` ends up
    holding a complete MemCube or is left as it was.  ``MemCubeError`` if ``path`` exists (as a
    file, or as a directory that is not empty: an empty one is filled), if its parent directory
    does not, or if an artifact's file cannot be read.  The same ``data`` and ``now`` give the
    same bytes, archives included.  ``progress(n, total)`` hears of the items as they are
    written (``records.item_lines``).
    """
    target = Path(path)
    archive = target.name.endswith(TAR_SUFFIX)
    _check_target(target, archive)
    try:
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".memcube-") as tmp:
            staging = Path(tmp) / "cube"
            staging.mkdir()
            manifest = _write_files(data, staging, now or utcnow(), progress)
            if archive:
                packed = Path(tmp) / "cube.tar.gz"
                _pack(staging, packed, manifest)
                _publish_file(packed, target)
            else:
                _publish_dir(staging, target)
    except OSError as exc:
        raise MemCubeError(f"cannot write a MemCube at {target}: {_why(exc)}") from exc
    return manifest


def _check_target(target: Path, archive: bool) -> None:
    if not target.parent.is_dir():
        raise MemCubeError(f"{target.parent} is not a directory", hint="create it first")
    taken = target.exists() or target.is_symlink()
    if taken and (archive or target.is_symlink() or not target.is_dir() or any(target.iterdir())):
        raise MemCubeError(
            f"{target} already exists" + ("" if archive else " and is not an empty directory"),
            hint="export to a new path: an export never overwrites",
        )


def _write_files(
    data: MemCube, root: Path, now: datetime, progress: Callable[[int, int], None] | None
) -> Manifest:
    _write_lines(root / ITEMS, records.item_lines(data, progress))
    _write_lines(root / EVENTS, map(records.event_record, data.events))
    files = _copy_artifacts(data.artifacts, root)
    _write_lines(root / ARTIFACTS, map(records.artifact_record, data.artifacts, files))
    with open(root / VECTORS, "wb") as out:
        np.save(out, np.ascontiguousarray(data.vectors, dtype="<f4"), allow_pickle=False)
    _write_lines(root / VECTOR_IDS, [data.vector_ids])
    names = [*DATA_FILES, *files]
    manifest = Manifest(
        format_version=FORMAT_VERSION,
        generator=_generator(),
        exported_at=now,
        cube=data.cube,
        dim=int(data.vectors.shape[1]),
        counts=data.counts(),
        sha256={name: _sha256(root / name) for name in names},
    )
    text = json.dumps(
        records.manifest_record(manifest), ensure_ascii=False, indent=2, allow_nan=False
    )
    (root / MANIFEST).write_text(text + "\n", encoding="utf-8")
    return manifest


def _write_lines(path: Path, records: Iterable[object]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for record in records:
            out.write(_dumps(record) + "\n")


def _dumps(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # NaN or infinity in a free JSON field
        raise MemCubeError(f"a value cannot be written as JSON: {exc}") from exc


def _copy_artifacts(artifacts: Sequence[Artifact], root: Path) -> list[str]:
    """Copy each artifact's file to ``artifacts/NNNNNN[.suffix]``; returns those names."""
    names: list[str] = []
    for n, artifact in enumerate(artifacts, 1):
        suffix = artifact.path.suffix if _SUFFIX.match(artifact.path.suffix) else ""
        name = f"{ARTIFACT_DIR}/{n:06d}{suffix}"
        (root / ARTIFACT_DIR).mkdir(exist_ok=True)
        try:
            shutil.copyfile(artifact.path, root / name)
        except OSError as exc:
            raise MemCubeError(  # the file's name only: where the database lives is private
                f"cannot read the file of artifact {artifact.artifact_id!r} "
                f"({artifact.path.name}): {_why(exc)}"
            ) from exc
        names.append(name)
    return names


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _generator() -> str:
    try:
        return f"memstrata {metadata.version('memstrata')}"
    except metadata.PackageNotFoundError:
        return "memstrata"


def _pack(root: Path, archive: Path, manifest: Manifest) -> None:
    """A gzipped tar of the files, cube.json first, with fixed times and owners (reproducible)."""
    mtime = int(manifest.exported_at.timestamp())
    with (
        open(archive, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=mtime) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name in [MANIFEST, *manifest.sha256]:
            info = tarfile.TarInfo(name)
            info.size = (root / name).stat().st_size
            info.mtime = mtime
            info.mode = 0o644
            with open(root / name, "rb") as source:
                tar.addfile(info, source)


def _publish_dir(staging: Path, target: Path) -> None:
    try:
        os.rename(staging, target)  # replaces an empty directory, refuses a non-empty one
    except OSError as exc:
        raise MemCubeError(
            f"cannot create {target}: {exc.strerror or exc}",
            hint="export to a new path or an empty directory",
        ) from exc


def _publish_file(packed: Path, target: Path) -> None:
    try:
        os.link(packed, target)  # fails, rather than overwrites, when target appeared meanwhile
    except FileExistsError as exc:
        raise MemCubeError(f"{target} already exists", hint="export to a new path") from exc
    except OSError:  # a file system without hard links
        if target.exists():
            raise MemCubeError(f"{target} already exists", hint="export to a new path") from None
        os.replace(packed, target)


@contextmanager
def open_cube(path: str | os.PathLike[str]) -> Iterator[MemCube]:
    """The MemCube at ``path`` (a directory, or a tar archive, compressed or not), fully checked.

    A tar is unpacked into a temporary directory, removed on exit, by this function itself (no
    ``extractall``, no extraction filter): only the file names the format defines, only regular
    files; links, devices, absolute names and ``..`` are refused whatever the Python version.  In a
    directory, every entry must be a regular file (not a symlink) with such a name.  Raises
    ``MemCubeError`` (missing, unreadable, corrupt, truncated, inconsistent or unsafe) or
    ``ConfigurationError`` (a format version other than ``FORMAT_VERSION``).
    """
    source = Path(path)
    if source.is_dir():
        yield _read(source)
        return
    if not source.is_file():
        raise MemCubeError(f"{source}: no such MemCube (not a file or directory)")
    with tempfile.TemporaryDirectory(prefix="memstrata-memcube-") as tmp:
        _unpack(source, Path(tmp))
        yield _read(Path(tmp))


#: The most bytes an archive may unpack to (its members' sizes added up).
MAX_UNPACKED_BYTES = 4 * 2**30


def _unpack(archive: Path, root: Path) -> None:
    """Copy the archive's checked members into ``root`` (an empty directory)."""
    hint = "it may be truncated or corrupt; export the cube again"
    with contextlib.ExitStack() as stack:
        try:
            tar = stack.enter_context(tarfile.open(archive, mode="r:*"))
        except _UNREADABLE as exc:
            raise MemCubeError(
                f"{archive} is not a tar archive (plain, gzip, bzip2 or xz)", hint=hint
            ) from exc
        seen: set[str] = set()
        total = 0
        try:
            for member in tar:
                name = _member_name(archive, member)
                if name is not None:
                    if name in seen:
                        raise MemCubeError(f"{archive}: member {name!r} appears twice")
                    seen.add(name)
                    total += member.size
                    if total > MAX_UNPACKED_BYTES:  # a small upload must not fill the disk
                        raise MemCubeError(
                            f"{archive} unpacks to more than {MAX_UNPACKED_BYTES} bytes",
                            hint="import it from a directory, or raise MAX_UNPACKED_BYTES",
                        )
                    _copy_member(tar, member, root / name, root)
        except _UNREADABLE as exc:
            raise MemCubeError(
                f"{archive} cannot be read to the end: {_why(exc)}", hint=hint
            ) from exc


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, root: Path) -> None:
    """Write a regular member's bytes to ``target``, a new file directly in ``root`` or in
    ``root/artifacts`` (checked again on the resolved path, in case of any surprise)."""
    target.parent.mkdir(exist_ok=True)
    allowed = (root.resolve(), (root / ARTIFACT_DIR).resolve())
    content = tar.extractfile(member)
    if target.resolve().parent not in allowed or content is None:
        raise MemCubeError(f"refusing member {member.name!r}: it does not stay in the MemCube")
    with content, open(target, "xb") as out:
        shutil.copyfileobj(content, out)


def _member_name(archive: Path, member: tarfile.TarInfo) -> str | None:
    """The member's checked name; None for a directory entry of the format (root, artifacts)."""
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    if member.isdir() and name.rstrip("/") in ("", ".", ARTIFACT_DIR):
        return None
    if member.isreg() and records.known_file(name):
        return name
    kind = (
        "a link" if member.issym() or member.islnk()
        else "a directory" if member.isdir()
        else "a file" if member.isreg()
        else "a special file"
    )  # fmt: skip
    raise MemCubeError(
        f"{archive}: refusing member {member.name!r} ({kind}): a MemCube holds only the regular "
        f"files {', '.join([MANIFEST, *DATA_FILES])} and {ARTIFACT_DIR}/NAME",
        hint="the archive was not written by a MemCube exporter, or was altered",
    )


def _list_files(root: Path) -> set[str]:
    """The MemCube's files under ``root``; ``MemCubeError`` for anything else found there."""
    found: set[str] = set()
    for entry in sorted(root.iterdir()):
        if entry.name == ARTIFACT_DIR and entry.is_dir() and not entry.is_symlink():
            names = [f"{ARTIFACT_DIR}/{e.name}" for e in sorted(entry.iterdir())]
        else:
            names = [entry.name]
        for name in names:
            path = root / name
            if path.is_symlink() or not path.is_file() or not records.known_file(name):
                raise MemCubeError(
                    f"unexpected entry {name!r} in the MemCube",
                    hint="a MemCube holds only the files its cube.json lists (no links)",
                )
            found.add(name)
    return found


def _read(root: Path) -> MemCube:
    files = _list_files(root)
    manifest = _read_manifest(root)
    _check_files(root, files, manifest)
    cube_id = manifest.cube.cube_id
    items: list[MemoryItem] = []
    versions: dict[str, list[Version]] = {}
    for where, raw in _read_lines(root / ITEMS, ITEMS):
        item, stored = records.item_from_line(raw, where, cube_id)
        items.append(item)
        versions[item.id] = stored
    events = [
        records.event_from_record(raw, where, cube_id)
        for where, raw in _read_lines(root / EVENTS, EVENTS)
    ]
    artifacts = [
        records.artifact_from_record(raw, where, root, manifest.sha256)
        for where, raw in _read_lines(root / ARTIFACTS, ARTIFACTS)
    ]
    vector_ids = _read_ids(root / VECTOR_IDS)
    data = MemCube(
        cube=manifest.cube,
        items=items,
        versions=versions,
        vector_ids=vector_ids,
        vectors=_read_vectors(root / VECTORS, len(vector_ids), manifest.dim),
        events=events,
        artifacts=artifacts,
    )
    _check_consistency(data, manifest)
    return data


def _read_manifest(root: Path) -> Manifest:
    failed = "is missing or not valid JSON"
    try:
        text = (root / MANIFEST).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemCubeError(f"{MANIFEST} {failed}: {_why(exc)}") from exc
    return records.manifest_from_record(_parse(text, MANIFEST, failed))


def _check_files(root: Path, files: set[str], manifest: Manifest) -> None:
    """Every file listed is there, every file there is listed, and every checksum matches."""
    listed = set(manifest.sha256)
    for name in [*DATA_FILES, *sorted(listed - {MANIFEST})]:
        if name not in files:
            raise MemCubeError(f"the MemCube has no file {name!r}", hint="it is incomplete")
    unlisted = sorted(files - listed - {MANIFEST})
    if unlisted:
        raise MemCubeError(f"file {unlisted[0]!r} is not listed in {MANIFEST}")
    if MANIFEST in listed:
        raise MemCubeError(f"{MANIFEST} lists a checksum of itself")
    for name, expected in sorted(manifest.sha256.items()):
        if _sha256(root / name) != expected:
            raise MemCubeError(
                f"{name} does not match its SHA-256 in {MANIFEST}",
                hint="the file is corrupt, truncated or altered; export the cube again",
            )


def _read_lines(path: Path, name: str) -> Iterator[tuple[str, Any]]:
    """(``"FILE line N"``, parsed JSON) for each line of a JSON Lines file."""
    with open(path, "rb") as source:
        for n, line in enumerate(source, 1):
            where = f"{name} line {n}"
            if not line.endswith(b"\n"):
                raise MemCubeError(f"{where} is cut short (no final newline)")
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MemCubeError(f"{where} is not valid JSON: {exc}") from exc
            yield where, _parse(text, where)


def _why(exc: BaseException) -> str:
    """What went wrong, without the paths an ``OSError`` names: a MemCube is read from a
    temporary folder, and a server's folders are none of its client's business."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


def _parse(text: str, where: str, failed: str = "is not valid JSON") -> Any:
    """``text`` as JSON, or ``MemCubeError`` naming ``where``: for what is not JSON (NaN and
    infinity included), and for a lone surrogate, which a ``\\ud800`` escape can write but no
    UTF-8 text (so no database row) can hold."""
    try:
        value = json.loads(text, parse_constant=_constant)
        if _SURROGATE_ESCAPE.search(text):  # a pair makes one character; check what came out
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(exc.object[exc.start])
        raise MemCubeError(
            f"{where} holds a lone surrogate (U+{code:04X}), which is not text",
            hint="a surrogate escape must be half of a pair",
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise MemCubeError(f"{where} {failed}: {exc}") from exc
    return value


def _constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _read_ids(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemCubeError(f"{VECTOR_IDS} is not valid JSON: {_why(exc)}") from exc
    ids = _parse(text, VECTOR_IDS)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise MemCubeError(f"{VECTOR_IDS} must be a JSON array of item ids")
    return cast(list[str], ids)


def _read_vectors(path: Path, rows: int, dim: int) -> Vectors:
    """The ``(rows, dim)`` float32 matrix of a ``.npy`` file, refusing pickles and odd sizes."""
    try:
        with open(path, "rb") as source:
            version = np.lib.format.read_magic(source)
            read_header = {
                (1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
            }.get(version)
            if read_header is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read_header(source)
            expected = (rows, dim)
            if shape != expected or dtype.kind != "f" or dtype.itemsize != 4:
                raise ValueError(f"holds {dtype} {shape}, expected float32 {expected}")
            if path.stat().st_size - source.tell() != rows * dim * 4:
                raise ValueError("its size does not match its header")
            source.seek(0)
            matrix = np.load(source, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise MemCubeError(f"{VECTORS} is not a usable vector matrix: {_why(exc)}") from exc
    if not np.isfinite(matrix).all():
        raise MemCubeError(f"{VECTORS} holds NaN or infinite values")
    return np.ascontiguousarray(matrix, dtype=np.float32)


def _check_consistency(data: MemCube, manifest: Manifest) -> None:
    """Counts match, ids are unique, every vector belongs to an item, and the embedder fits."""
    counts = data.counts()
    for name in COUNTS:
        if counts[name] != manifest.counts[name]:
            raise MemCubeError(
                f"{MANIFEST} counts {manifest.counts[name]} {name} but the files hold {counts[name]}"
            )
    item_ids = _unique((i.id for i in data.items), ITEMS, "item id")
    _unique((i.external_id for i in data.items if i.external_id is not None), ITEMS, "external_id")
    _unique((a.artifact_id for a in data.artifacts), ARTIFACTS, "artifact_id")
    for item_id in _unique(data.vector_ids, VECTOR_IDS, "item id"):
        if item_id not in item_ids:
            raise MemCubeError(f"{VECTOR_IDS} names {item_id!r}, which is not in {ITEMS}")
    if data.vector_ids and data.cube.embedder is None:
        raise MemCubeError(f"{MANIFEST} gives vectors but no embedder fingerprint")


def _unique(values: Iterable[str], where: str, what: str) -> set[str]:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise MemCubeError(f"{where}: {what} {value!r} appears twice")
        seen.add(value)
    return seen
