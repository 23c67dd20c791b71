"""The MemCube format's records: constants, data classes, and JSON objects ↔ model objects.

Encoders turn model objects into the JSON objects written (``cube.json``, the lines of
``items.jsonl``, ``events.jsonl`` and ``artifacts.jsonl``); decoders check a parsed JSON object
field by field and build the model object, raising ``MemCubeError`` that names the file, line
and field.  Fields absent from a line read as null; unknown fields are refused (any change to
the files bumps ``FORMAT_VERSION``).  Pure functions: no files, no database.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from memstrata.errors import ConfigurationError, MemCubeError
from memstrata.memcube.fields import Fields
from memstrata.model import (
    CUBE_KINDS,
    ITEM_TYPES,
    STATUSES,
    TIERS,
    Cube,
    CubeKind,
    Event,
    ItemType,
    MemoryItem,
    Status,
    Tier,
    Version,
    utcnow,
)

FORMAT = "memstrata.memcube"
FORMAT_VERSION = 1
MANIFEST = "cube.json"
ITEMS = "items.jsonl"
VECTORS = "vectors.npy"
VECTOR_IDS = "vectors.ids.json"
EVENTS = "events.jsonl"
ARTIFACTS = "artifacts.jsonl"
ARTIFACT_DIR = "artifacts"
#: Every file but ``cube.json`` and the artifacts' own files, in the order they are written.
DATA_FILES = (ITEMS, VECTORS, VECTOR_IDS, EVENTS, ARTIFACTS)
ARTIFACT_KINDS = ("kv_cache", "lora", "image")
#: A path ending so is written as a gzipped tar; any other path as a directory.
TAR_SUFFIX = ".tar.gz"
#: Fields of an ``items.jsonl`` line (and of a version's ``item``), in the order written.
ITEM_FIELDS = (
    "id", "version", "tier", "type", "status", "session_id", "user_id", "agent_id", "role",
    "speaker", "text", "key", "keywords", "tags", "metadata", "external_id", "event_time",
    "created_at", "updated_at", "valid_from", "valid_to", "merged_into", "confidence", "pinned",
    "access_count", "last_accessed_at", "heat", "sources", "segment_id", "expires_at",
)  # fmt: skip
_VERSION_FIELDS = ("version", "at", "actor", "reason", "item")
_EVENT_FIELDS = ("at", "actor", "item_id", "op", "version", "reason", "before", "after")
_ARTIFACT_FIELDS = (
    "artifact_id", "kind", "fingerprint", "file", "sha256", "size_bytes", "metadata", "created_at",
)  # fmt: skip
_MANIFEST_FIELDS = (
    "format", "format_version", "generator", "exported_at", "cube", "embedder", "counts", "sha256",
)  # fmt: skip
_CUBE_FIELDS = ("cube_id", "name", "owner", "kind", "settings", "created_at")
COUNTS = ("items", "versions", "vectors", "events", "artifacts")
#: What a cube, item or artifact id looks like (as ``MemoryOS`` checks ids).
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FINGERPRINT_DIM = re.compile(r"/([0-9]+)$")
Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Artifact:
    """A cube's artifact: the row describing it and where its bytes are.

    ``path`` is the stored file when exporting, the unpacked copy when importing (valid only
    inside ``open_cube``).
    """

    artifact_id: str
    kind: str
    fingerprint: str
    path: Path
    sha256: str | None = None
    size_bytes: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class MemCube:
    """Everything a MemCube holds, as model objects.

    ``cube.embedder`` is the fingerprint (``model_id/dim``) of ``vectors``, an ``(n, dim)``
    float32 matrix whose row i is the vector of item ``vector_ids[i]``; it is None only for a
    cube without vectors.  ``versions`` maps an item id to its stored versions, oldest first (an
    item may have fewer stored versions than its ``version``: some changes keep no snapshot).
    Every item's and event's ``cube_id`` is ``cube.cube_id``; ``Event.seq`` is not part of the
    format (0 once read), the order of ``events`` is.
    """

    cube: Cube
    items: list[MemoryItem]
    versions: dict[str, list[Version]]
    vector_ids: list[str]
    vectors: Vectors
    events: list[Event]
    artifacts: list[Artifact]

    def counts(self) -> dict[str, int]:
        """The ``counts`` of ``cube.json``."""
        return {
            "items": len(self.items),
            "versions": sum(len(v) for v in self.versions.values()),
            "vectors": len(self.vector_ids),
            "events": len(self.events),
            "artifacts": len(self.artifacts),
        }


@dataclass(frozen=True)
class Manifest:
    """What ``cube.json`` says: the cube, its embedder's ``dim``, counts and file checksums."""

    format_version: int
    generator: str
    exported_at: datetime
    cube: Cube
    dim: int
    counts: dict[str, int]
    #: file path inside the MemCube → SHA-256 (hex) of its bytes, for every file but cube.json
    sha256: dict[str, str]


def iso(when: datetime) -> str:
    """A time as written in a MemCube: UTC, microseconds, ``Z`` (``2024-05-08T13:56:00.000000Z``).

    The year always has four digits (``0099-…``), as ISO 8601 and ``datetime.fromisoformat``
    want: ``strftime("%Y")`` writes years before 1000 with fewer on some platforms.
    """
    utc = when.astimezone(timezone.utc)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z"


def _iso_or_none(when: datetime | None) -> str | None:
    return None if when is None else iso(when)


def manifest_record(manifest: Manifest) -> dict[str, Any]:
    cube = manifest.cube
    return {
        "format": FORMAT,
        "format_version": manifest.format_version,
        "generator": manifest.generator,
        "exported_at": iso(manifest.exported_at),
        "cube": {
            "cube_id": cube.cube_id,
            "name": cube.name,
            "owner": cube.owner,
            "kind": cube.kind,
            "settings": cube.settings,
            "created_at": iso(cube.created_at),
        },
        "embedder": {"fingerprint": cube.embedder, "dim": manifest.dim},
        "counts": manifest.counts,
        "sha256": manifest.sha256,
    }


def _item_record(item: MemoryItem) -> dict[str, Any]:
    """An item as a JSON object with ``ITEM_FIELDS`` (no ``cube_id``: the file is one cube's)."""
    return {
        "id": item.id, "version": item.version, "tier": item.tier, "type": item.type,
        "status": item.status, "session_id": item.session_id, "user_id": item.user_id,
        "agent_id": item.agent_id, "role": item.role, "speaker": item.speaker, "text": item.text,
        "key": item.key, "keywords": item.keywords, "tags": item.tags, "metadata": item.metadata,
        "external_id": item.external_id, "event_time": iso(item.event_time),
        "created_at": iso(item.created_at), "updated_at": iso(item.updated_at),
        "valid_from": _iso_or_none(item.valid_from), "valid_to": _iso_or_none(item.valid_to),
        "merged_into": item.merged_into, "confidence": item.confidence, "pinned": item.pinned,
        "access_count": item.access_count,
        "last_accessed_at": _iso_or_none(item.last_accessed_at), "heat": item.heat,
        "sources": [s.to_dict() for s in item.sources], "segment_id": item.segment_id,
        "expires_at": _iso_or_none(item.expires_at),
    }  # fmt: skip


#: Items encoded between two reports to ``item_lines``' ``progress``.
ITEMS_TOLD_EVERY = 1000


def item_lines(
    data: MemCube, progress: Callable[[int, int], None] | None = None
) -> Iterator[dict[str, Any]]:
    """The lines of ``items.jsonl``: ``item_line`` of each item, in order, made as they are
    taken.  ``progress(n, total)`` hears of each ``ITEMS_TOLD_EVERY`` taken (first
    ``(0, total)``; the ``n`` add up to ``total``, the number of items)."""
    total = len(data.items)
    tell = progress or (lambda n, total: None)
    tell(0, total)
    for start in range(0, total, ITEMS_TOLD_EVERY):
        chunk = data.items[start : start + ITEMS_TOLD_EVERY]
        yield from (item_line(i, data.versions.get(i.id, [])) for i in chunk)
        tell(len(chunk), total)


def item_line(item: MemoryItem, versions: Sequence[Version]) -> dict[str, Any]:
    stored = [
        {"version": v.version, "at": iso(v.at), "actor": v.actor, "reason": v.reason,
         "item": _item_record(v.item)}
        for v in versions
    ]  # fmt: skip
    return {**_item_record(item), "versions": stored}


def event_record(event: Event) -> dict[str, Any]:
    return {
        "at": iso(event.at), "actor": event.actor, "item_id": event.item_id, "op": event.op,
        "version": event.version, "reason": event.reason, "before": event.before,
        "after": event.after,
    }  # fmt: skip


def artifact_record(artifact: Artifact, file: str) -> dict[str, Any]:
    return {
        "artifact_id": artifact.artifact_id, "kind": artifact.kind,
        "fingerprint": artifact.fingerprint, "file": file, "sha256": artifact.sha256,
        "size_bytes": artifact.size_bytes, "metadata": artifact.metadata,
        "created_at": iso(artifact.created_at),
    }  # fmt: skip


def manifest_from_record(raw: object) -> Manifest:
    """The manifest of ``cube.json`` (parsed JSON), checked.

    ``MemCubeError`` if it is not a MemCube manifest or a field is wrong; ``ConfigurationError``
    for a format version other than ``FORMAT_VERSION`` (checked first: a newer version may
    differ in anything else).
    """
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise MemCubeError(
            f"{MANIFEST} does not say format {FORMAT!r}", hint="this is not a MemCube"
        )
    version = raw.get("format_version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        newer = (
            isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
        )
        raise ConfigurationError(
            f"this MemCube has format version {version!r}; this memstrata reads version "
            f"{FORMAT_VERSION}",
            hint="upgrade memstrata to import it" if newer else "export it again with memstrata",
        )
    f = Fields(raw, MANIFEST, _MANIFEST_FIELDS)
    embedder = Fields(
        f.mapping("embedder", required=True), f"{MANIFEST} embedder", ("fingerprint", "dim")
    )
    dim = embedder.count("dim")
    fingerprint = embedder.string("fingerprint")
    suffix = _FINGERPRINT_DIM.search(fingerprint or "")
    if fingerprint is not None and (suffix is None or int(suffix.group(1)) != dim):
        embedder.fail("fingerprint", f"a fingerprint 'model_id/{dim}' (ending in the dimension)")
    counts = Fields(f.mapping("counts", required=True), f"{MANIFEST} counts", COUNTS)
    sha256 = f.mapping("sha256", required=True)
    if not all(isinstance(v, str) and _SHA256.match(v) for v in sha256.values()):
        f.fail("sha256", "an object of file name → lowercase hex SHA-256")
    return Manifest(
        format_version=FORMAT_VERSION,
        generator=f.text("generator"),
        exported_at=f.time("exported_at"),
        cube=_cube_from_record(f.mapping("cube", required=True), fingerprint),
        dim=dim,
        counts={name: counts.count(name) for name in COUNTS},
        sha256=cast(dict[str, str], sha256),
    )


def known_file(name: str) -> bool:
    if name in (MANIFEST, *DATA_FILES):
        return True
    folder, _, base = name.partition("/")
    return folder == ARTIFACT_DIR and _FILE_NAME.match(base) is not None


def _item_from_fields(f: Fields, cube_id: str) -> MemoryItem:
    return MemoryItem(
        id=f.ident("id"),
        cube_id=cube_id,
        text=f.text("text"),
        version=f.count("version", minimum=1),
        tier=cast(Tier, f.choice("tier", TIERS)),
        type=cast(ItemType, f.choice("type", ITEM_TYPES)),
        status=cast(Status, f.choice("status", STATUSES)),
        session_id=f.string("session_id"),
        user_id=f.string("user_id"),
        agent_id=f.string("agent_id"),
        role=f.string("role"),
        speaker=f.string("speaker"),
        key=f.string("key"),
        keywords=f.strings("keywords"),
        tags=f.strings("tags"),
        metadata=f.mapping("metadata"),
        external_id=f.string("external_id"),
        event_time=f.time("event_time"),
        created_at=f.time("created_at"),
        updated_at=f.time("updated_at"),
        valid_from=f.optional_time("valid_from"),
        valid_to=f.optional_time("valid_to"),
        merged_into=f.string("merged_into"),
        confidence=f.number("confidence"),
        pinned=f.flag("pinned"),
        access_count=f.count("access_count", default=0),
        last_accessed_at=f.optional_time("last_accessed_at"),
        heat=f.number("heat"),
        sources=f.sources("sources"),
        segment_id=f.string("segment_id"),
        expires_at=f.optional_time("expires_at"),
    )


def item_from_line(raw: object, where: str, cube_id: str) -> tuple[MemoryItem, list[Version]]:
    f = Fields(raw, where, (*ITEM_FIELDS, "versions"))
    item = _item_from_fields(f, cube_id)
    stored = f.raw.get("versions") or []
    if not isinstance(stored, list):
        f.fail("versions", "an array of versions")
    versions: list[Version] = []
    for n, record in enumerate(stored, 1):
        v = Fields(record, f"{where} versions[{n}]", _VERSION_FIELDS)
        number = v.count("version", minimum=1)
        snapshot = _item_from_fields(
            Fields(v.raw.get("item"), f"{v.where} item", ITEM_FIELDS), cube_id
        )
        if snapshot.id != item.id or snapshot.version != number:
            v.fail("item", f"the item {item.id!r} as it stood at version {number}")
        if number > item.version or (versions and number <= versions[-1].version):
            v.fail("version", f"ascending and at most the item's version {item.version}")
        versions.append(
            Version(number, snapshot, v.time("at"), v.string("actor"), v.string("reason"))
        )
    return item, versions


def event_from_record(raw: object, where: str, cube_id: str) -> Event:
    f = Fields(raw, where, _EVENT_FIELDS)
    before, after = f.raw.get("before"), f.raw.get("after")
    return Event(
        seq=0,
        at=f.time("at"),
        actor=f.string("actor"),
        cube_id=cube_id,
        item_id=f.string("item_id"),
        op=f.text("op"),
        before=None if before is None else f.mapping("before"),
        after=None if after is None else f.mapping("after"),
        version=f.integer("version"),
        reason=f.string("reason"),
    )


def artifact_from_record(
    raw: object, where: str, root: Path, listed: Mapping[str, str]
) -> Artifact:
    f = Fields(raw, where, _ARTIFACT_FIELDS)
    file = f.text("file")
    if not file.startswith(f"{ARTIFACT_DIR}/") or not known_file(file) or file not in listed:
        f.fail("file", f"the name of a file under {ARTIFACT_DIR}/ listed in {MANIFEST}")
    sha256 = f.string("sha256")
    if sha256 is not None and not _SHA256.match(sha256):
        f.fail("sha256", "a lowercase hex SHA-256 or null")
    return Artifact(
        artifact_id=f.ident("artifact_id"),
        kind=f.choice("kind", ARTIFACT_KINDS),
        fingerprint=f.text("fingerprint"),
        path=root / file,
        sha256=sha256,
        size_bytes=f.integer("size_bytes"),
        metadata=f.mapping("metadata"),
        created_at=f.time("created_at"),
    )


def _cube_from_record(raw: Mapping[str, Any], fingerprint: str | None) -> Cube:
    f = Fields(raw, f"{MANIFEST} cube", _CUBE_FIELDS)
    name = f.text("name")
    if not name.strip():
        f.fail("name", "a non-empty string")
    settings = f.mapping("settings")  # their values are the core's to check (memory.cubes)
    return Cube(
        cube_id=f.ident("cube_id"),
        name=name,
        owner=f.text("owner"),
        kind=cast(CubeKind, f.choice("kind", CUBE_KINDS)),
        settings=settings,
        embedder=fingerprint,
        created_at=f.time("created_at"),
    )
