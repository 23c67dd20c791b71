"""MemCube export and import (``MemoryOS.export`` and ``import_cube``, after their grant checks).

The format lives in ``memstrata.memcube`` and the rows behind the store's interchange methods;
this module decides which ids an import gets and whose names it may keep (an administrator's
import is a restore, anyone else's a copy), checks the cube's settings, re-embeds when asked,
drops the artifacts that are model state, and places the other artifacts' files.

**Nothing imported is loaded as model state** (issue 24, finding 4): a ``kv_cache`` artifact's
bytes go to llama.cpp's state loader and a ``lora`` artifact's tensors onto the model, and a
MemCube is a file anyone can write, its fingerprints included (they name public things: a
model's sha256, a context length, a library version).  So every import, an administrator's
restore too, stores none of them (``MODEL_STATE``); its ``import`` event counts what was left
out (``artifacts_dropped``), and the server makes its own again: a KV cache on the cube's next
chat (``memory.activation``), an adapter when one is asked for (``train_adapter``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from memstrata.embed import Embedder, fingerprint
from memstrata.errors import ConfigurationError, CubeNotFound, MemCubeError, ValidationError
from memstrata.memcube import (
    FORMAT_VERSION,
    ID_PATTERN,
    Artifact,
    Manifest,
    MemCube,
    named_users,
    open_cube,
    reclaim,
    rehome,
    write_cube,
)
from memstrata.memory.embedding import embed_items
from memstrata.model import Cube, User, new_id, utcnow
from memstrata.store.base import ArchiveStore, ArchiveTarget, ArtifactStore
from memstrata.tiers.settings import TierSettings

log = logging.getLogger(__name__)

#: How many of the other users a MemCube names the ``import`` event lists (it counts them all).
MAX_NAMED = 100
#: Artifact kinds that are model state (loaded into a model, never only read): an import never
#: stores one (see the module docstring).
MODEL_STATE = frozenset({"kv_cache", "lora"})


def export_cube(
    store: ArchiveStore,
    cube_id: str,
    path: str | os.PathLike[str],
    *,
    artifacts: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Write cube ``cube_id`` as a MemCube at ``path``; returns what its ``cube.json`` says.

    ``path`` is a new directory (or an empty one), or a new ``.tar.gz`` file.  Needs ``admin``
    on the cube: an export carries the audit trail (who changed what, and why) and every
    version of every item, more than ``read`` shows, and whoever imports it owns the copy.
    Raises ``MemCubeError`` if ``path`` exists (an export never overwrites); the database is
    only read, in one consistent snapshot.  Without ``artifacts`` the cube's KV caches and
    adapters are left out (they are large and made for one model; a KV cache is rebuilt after
    an import when a chat needs it).  ``progress(n, total)`` hears of the items as they are
    written (``memstrata.memcube.write_cube``).
    """
    data = store.read_cube(cube_id)
    return write_cube(data if artifacts else replace(data, artifacts=[]), path, progress=progress)


def import_cube(
    store: ArchiveTarget,
    embedder: Embedder,
    path: str | os.PathLike[str],
    *,
    owner: str,
    importer: User,
    cube_id: str | None = None,
    keep_ids: bool = True,
    reembed: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Cube:
    """Import the MemCube at ``path`` (directory or tar) as a new cube; returns the cube.

    ``owner`` (an existing user) owns it with ``admin``; the source's grants are not imported.
    ``importer`` is who asks (the owner, or an administrator importing for the owner).

    An administrator's import is a restore: the MemCube's claims (the items' ``user_id``, the
    actors of versions and events) are kept, and with ``keep_ids`` items and artifacts keep
    their ids (``AlreadyExists`` names one that is stored already: an administrator may read
    every event, ids included).  Anyone else's import is a copy: every user the MemCube names
    other than the importer becomes the importer, what it said kept in the items'
    ``metadata["origin"]`` (``memstrata.memcube.reclaim``), and items and artifacts always get
    new ids, whatever ``keep_ids`` says: ids are global, so keeping them would answer "already
    stored" for an id in a cube the importer cannot read.  New ids come in the same order, and
    every reference follows (``memstrata.memcube.rehome``).  The cube id is ``cube_id`` if given,
    else the exported one (a new one when ``keep_ids`` is false); ``AlreadyExists`` if it is
    taken (cube ids are names anyone may try, as ``create_cube`` does).  Everything else (texts,
    times, versions, events with their times) is kept as exported; one ``import`` event, by the
    importer, says what was done (``ids``, ``claims`` kept or rewritten, the other users named,
    and ``artifacts_dropped``: kind → how many of the MemCube's KV caches and adapters were left
    out).  Those are never imported, whoever imports (``MODEL_STATE``: see the module
    docstring); a KV cache is made again on the cube's next chat, an adapter by
    ``train_adapter``.

    Vectors are imported as they are when the MemCube's embedder fingerprint is this
    MemoryOS's (or it has none); otherwise ``ConfigurationError``, unless ``reembed``, which
    gives every item with text a vector from this embedder, recomputed (``reembed`` always
    recomputes, and also embeds items the MemCube gave no vector).  Another format version is also
    a ``ConfigurationError``; a missing, corrupt, truncated, inconsistent or unsafe MemCube is a
    ``MemCubeError``.  Everything is checked before the first write and the rows are written in
    one transaction, so a failed import leaves the database (and the artifacts directory) as it
    was.

    ``progress(n, total)`` hears of the items as they are re-embedded (``memory.embedding``),
    with ``reembed`` only: the embedder is what makes an import slow; reading the MemCube and its
    one transaction are not followed.
    """
    if cube_id is not None and (not isinstance(cube_id, str) or not ID_PATTERN.match(cube_id)):
        raise ValidationError(
            f"cube_id {cube_id!r} is not a valid id",
            hint="use 1-128 letters, digits and _ . : @ -, starting with a letter or digit",
        )
    if not isinstance(keep_ids, bool) or not isinstance(reembed, bool):
        raise ValidationError("keep_ids and reembed must be true or false")
    current = fingerprint(embedder)
    with open_cube(path) as opened:
        _check_embedder(opened, current, reembed)
        source, dropped = _without_model_state(opened)
        data, note = _taken_in(source, owner, importer, cube_id, keep_ids)
        note["artifacts_dropped"] = dropped
        _check_settings(data)
        store.check_free(data)
        if reembed:
            data = _reembedded(embedder, data, progress)
        data = replace(data, cube=replace(data.cube, embedder=current))
        _insert(store, data, importer.user_id, {**note, "reembedded": reembed})
    cube = store.get_cube(data.cube.cube_id)
    if cube is None:  # pragma: no cover - deleted by someone else in the meantime
        raise CubeNotFound(data.cube.cube_id)
    return cube


def _without_model_state(source: MemCube) -> tuple[MemCube, dict[str, int]]:
    """``source`` without its ``MODEL_STATE`` artifacts, and how many of each kind it had."""
    dropped = Counter(a.kind for a in source.artifacts if a.kind in MODEL_STATE)
    if dropped:
        log.info("import of cube %s: %s left out", source.cube.cube_id, dict(dropped))
    kept = [a for a in source.artifacts if a.kind not in MODEL_STATE]
    return replace(source, artifacts=kept), dict(sorted(dropped.items()))


def _check_embedder(source: MemCube, current: str, reembed: bool) -> None:
    """``ConfigurationError`` when the MemCube's vectors are another embedder's (and not
    ``reembed``)."""
    if source.cube.embedder not in (None, current) and not reembed:
        raise ConfigurationError(
            f"the MemCube's vectors were made by {source.cube.embedder}; this MemoryOS "
            f"embeds with {current}",
            hint="import it with reembed=True (memstrata import --reembed), or open "
            "memstrata with the embedder that made it",
        )


def _taken_in(
    source: MemCube, owner: str, importer: User, cube_id: str | None, keep_ids: bool
) -> tuple[MemCube, dict[str, Any]]:
    """``source`` as ``importer`` may bring it in for ``owner`` (a restore by an administrator,
    a copy by anyone else: see ``import_cube``), and what the ``import`` event says of it."""
    restore = importer.role == "admin"
    kept = keep_ids and restore
    others = sorted(named_users(source) - {importer.user_id})
    claimed = source if restore else reclaim(source, importer.user_id, at=utcnow())
    target = cube_id or (source.cube.cube_id if keep_ids else new_id())
    note = {
        "from_cube_id": source.cube.cube_id,
        "format_version": FORMAT_VERSION,
        "items": len(source.items),
        "ids": "kept" if kept else "new",
        "claims": "kept" if restore else "rewritten",
        "other_users": others[:MAX_NAMED],
        "other_user_count": len(others),
    }
    return _rehomed(claimed, owner, target, kept), note


def _insert(store: ArchiveTarget, data: MemCube, actor: str, note: dict[str, Any]) -> None:
    """Store ``data`` and its artifacts' files (removed again if the rows cannot be written)."""
    placed = _place_artifacts(store, data)
    try:
        store.insert_cube(
            data,
            artifact_paths={k: v[0] for k, v in placed.items()},
            actor=actor,
            note=note,
        )
    except BaseException:
        _remove([file for _, file in placed.values()])
        raise


def _check_settings(data: MemCube) -> None:
    """``MemCubeError`` when the MemCube's cube settings are not valid tier settings."""
    try:
        TierSettings.parse(data.cube.settings)
    except ValidationError as exc:
        raise MemCubeError(f"cube.json cube settings: {exc.message}", hint=exc.hint) from exc


def _rehomed(source: MemCube, owner: str, target: str, keep_ids: bool) -> MemCube:
    """``source`` as cube ``target`` of ``owner``, with new item/artifact ids unless kept."""
    if keep_ids:
        return rehome(source, cube_id=target, owner=owner)
    # new_id() increases within a process, so sorted old ids give new ids in the same order.
    return rehome(
        source,
        cube_id=target,
        owner=owner,
        item_ids={old: new_id() for old in sorted(i.id for i in source.items)},
        artifact_ids={old: new_id() for old in sorted(a.artifact_id for a in source.artifacts)},
    )


def _reembedded(
    embedder: Embedder, data: MemCube, progress: Callable[[int, int], None] | None
) -> MemCube:
    """``data`` with a vector from ``embedder`` for every item that has text (in item order),
    whether or not the MemCube gave it one."""
    items = [item for item in data.items if item.text.strip()]
    vectors = embed_items(embedder, items, progress)
    return replace(data, vector_ids=[item.id for item in items], vectors=vectors)


def _place_artifacts(store: ArtifactStore, data: MemCube) -> dict[str, tuple[str, Path]]:
    """Copy each artifact's file beside the database; artifact id → (row path, file).

    The row path is relative to the database's directory.  ``MemCubeError`` (with every file
    copied so far removed) if a destination file exists already.
    """
    if not data.artifacts:
        return {}
    folder = store.artifact_dir(data.cube.cube_id)
    base = folder.parent.parent
    placed: dict[str, tuple[str, Path]] = {}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for artifact in data.artifacts:
            file = folder / _file_name(artifact)
            with open(artifact.path, "rb") as content, open(file, "xb") as out:
                placed[artifact.artifact_id] = (file.relative_to(base).as_posix(), file)
                shutil.copyfileobj(content, out)
    except OSError as exc:
        _remove([file for _, file in placed.values()])
        where = folder.relative_to(base).as_posix()  # not the full path: a server's is private
        raise MemCubeError(
            f"cannot store the artifacts' files in {where}, beside the database: "
            f"{exc.strerror or type(exc).__name__}"
        ) from exc
    return placed


def _file_name(artifact: Artifact) -> str:
    suffix = artifact.path.suffix
    return artifact.artifact_id + (suffix if suffix[1:].isalnum() else "")


def _remove(files: list[Path]) -> None:
    for file in files:
        file.unlink(missing_ok=True)
    for folder in {file.parent for file in files}:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if it is left empty
