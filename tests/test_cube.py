"""MemCube export and import: the files, the round trip, id remapping, re-embedding, and bad input
(corrupt, truncated, altered or malicious MemCubes), which must change nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from memstrata import MemoryItem, MemoryOS
from memstrata.cli import cli
from memstrata.embed import fingerprint
from memstrata.errors import (
    AdminRequired,
    AlreadyExists,
    ConfigurationError,
    CubeNotFound,
    MemCubeError,
    PermissionDenied,
    UserNotFound,
    ValidationError,
)
from memstrata.memcube import FORMAT_VERSION, ITEM_FIELDS, MemCube, open_cube, write_cube
from memstrata.memcube.records import ARTIFACT_KINDS
from memstrata.memory.cubes import MODEL_STATE
from memstrata.model import Cube, Event
from memstrata.text import embedding_text

#: every turn leaves the working tier at once, joins a segment and is promoted: all tiers get items
HOT = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}
TURNS = [
    ("Ann", "My name is Ann and I live in Porto. I really love hiking.", "2024-03-01T10:00:00Z"),
    ("Bob", "Nice! I moved to Lisbon last month.", "2024-03-01T10:01:00.123456Z"),
    ("Ann", "I live in Porto.", "2024-03-02T09:00:00Z"),
    ("Bob", "ok", "2030-01-01T00:00:00Z"),
]
TABLES = ("users", "cubes", "grants", "items", "item_versions", "vectors", "items_fts", "events",
          "artifacts", "tasks")  # fmt: skip
FILES = ["items.jsonl", "vectors.npy", "vectors.ids.json", "events.jsonl", "artifacts.jsonl"]


@pytest.fixture
def cube(mos: MemoryOS, tmp_path: Path) -> str:
    return build(mos, tmp_path)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export (directory) of ``build``'s cube, made once for the tests that damage a copy."""
    folder = tmp_path_factory.mktemp("pristine")
    with MemoryOS.open(str(folder / "source.db"), workers=0) as m:
        m.export(build(m, folder), folder / "export", user_id="ann")
    return folder / "export"


@pytest.fixture
def exported(pristine: Path, tmp_path: Path) -> Path:
    """A copy of ``pristine`` at ``tmp_path / "out"``, free to damage."""
    shutil.copytree(pristine, tmp_path / "out")
    return tmp_path / "out"


def build(mos: MemoryOS, folder: Path) -> str:
    """Cube ``notes`` of ``ann`` holding every tier, an updated and a deleted item, metadata, an
    external id, a read grant to ``bob`` and one artifact (a file in ``folder``)."""
    mos.create_user("ann")
    mos.create_user("bob")
    mos.create_cube("notes", owner="ann", cube_id="notes", kind="agent", settings=HOT)
    messages = [
        {"name": name, "content": text, "timestamp": when, "metadata": {"n": n, "é": [1.5, None]}}
        for n, (name, text, when) in enumerate(TURNS)
    ]
    messages[1]["id"] = "msg-2"
    ids = mos.add(messages, user_id="ann", cube_id="notes", session_id="s1")
    assert mos.wait("notes", timeout=120)
    mos.update(ids[2], user_id="ann", text="I still live in Porto.", reason="typo")
    mos.delete(ids[3], user_id="ann", reason="noise")
    mos.grant("notes", "bob", "read", by="ann")
    file = folder / "stable-context.kv"
    file.write_bytes(os.urandom(3000))
    with mos.store.transaction() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO artifacts (artifact_id, cube_id, kind, path, fingerprint, sha256, "
            "size_bytes, metadata, created_at) VALUES ('kv-1', 'notes', 'kv_cache', ?, "
            "'smollm2/tok/abc', NULL, 3000, '{\"tokens\":812}', 1717000000.25)",
            (str(file),),
        )
    return "notes"


@pytest.fixture
def other(tmp_path: Path) -> Iterator[MemoryOS]:
    """A second, empty database with user ``ann`` and administrator ``root`` (whose imports are
    restores: ids and authorship kept; ann's own are copies, see tests/test_import_identity.py)."""
    with MemoryOS.open(str(tmp_path / "other.db"), workers=0) as m:
        m.create_user("ann")
        m.create_user("root", role="admin")
        yield m


def counts(memory: MemoryOS) -> dict[str, int]:
    """Rows per table and the change counter, read through a separate connection."""
    conn = sqlite3.connect(memory.store.path)  # type: ignore[attr-defined]
    try:
        found = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        seq = conn.execute("SELECT value FROM counters WHERE name = 'item_seq'").fetchone()[0]
    finally:
        conn.close()
    return {**found, "item_seq": seq}


def manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "cube.json").read_text(encoding="utf-8"))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rewrite(root: Path, name: str, data: bytes, *, fix_checksum: bool = True) -> None:
    """Replace a file of a MemCube directory, updating its checksum in cube.json (or not)."""
    (root / name).write_bytes(data)
    if fix_checksum:
        edit_manifest(root, lambda m: m["sha256"].__setitem__(name, sha256(root / name)))


def edit_manifest(root: Path, change: Callable[[dict[str, Any]], object]) -> None:
    data = manifest(root)
    change(data)
    (root / "cube.json").write_text(json.dumps(data), encoding="utf-8")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- export ----------------------------------------------------------------------------------


def test_export_writes_every_file_with_counts_and_checksums(
    mos: MemoryOS, cube: str, tmp_path: Path
) -> None:
    before = counts(mos)
    result = mos.export(cube, tmp_path / "out", user_id="ann")
    root = tmp_path / "out"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == sorted(
        ["cube.json", *FILES, "artifacts/000001.kv"]
    )
    data = manifest(root)
    assert data["format"] == "memstrata.memcube" and data["format_version"] == FORMAT_VERSION
    assert data["cube"] == {
        "cube_id": "notes", "name": "notes", "owner": "ann", "kind": "agent",
        "settings": mos.store.get_cube("notes").settings,
        "created_at": data["cube"]["created_at"],
    }  # fmt: skip
    assert data["embedder"] == {"fingerprint": fingerprint(mos.embedder), "dim": 384}
    assert data["counts"] == result.counts == {
        "items": before["items"], "versions": before["item_versions"],
        "vectors": before["vectors"], "events": len(mos.store.events(cube_id=cube)),
        "artifacts": 1,
    }  # fmt: skip
    assert data["sha256"] == {name: sha256(root / name) for name in [*FILES, "artifacts/000001.kv"]}
    items = lines(root / "items.jsonl")
    assert [i["id"] for i in items] == sorted(i["id"] for i in items)
    assert all(list(i) == [*ITEM_FIELDS, "versions"] for i in items)
    assert {i["tier"] for i in items} == {"working", "mid", "long"}
    edited = next(i for i in items if i["text"] == "I still live in Porto.")
    assert [(v["version"], v["item"]["text"], v["reason"]) for v in edited["versions"]][-1] == (
        edited["version"], "I still live in Porto.", "typo",
    )  # fmt: skip
    assert edited["versions"][0]["item"]["text"] == "I live in Porto."
    assert any(i["status"] == "deleted" for i in items)
    assert next(i for i in items if i["external_id"] == "msg-2")["event_time"] == (
        "2024-03-01T10:01:00.123456Z"
    )
    ids = json.loads((root / "vectors.ids.json").read_text())
    matrix = np.load(root / "vectors.npy", allow_pickle=False)
    assert matrix.dtype == np.float32 and matrix.shape == (len(ids), 384)
    assert np.array_equal(matrix, mos.store.get_vectors(ids, [cube]))
    (artifact,) = lines(root / "artifacts.jsonl")
    assert artifact["file"] == "artifacts/000001.kv" and artifact["metadata"] == {"tokens": 812}
    assert (root / "artifacts/000001.kv").read_bytes() == (
        tmp_path / "stable-context.kv"
    ).read_bytes()
    assert [e["op"] for e in lines(root / "events.jsonl")][:2] == ["create_cube", "grant"]
    assert counts(mos) == before  # an export only reads


def test_a_tar_export_holds_the_same_files_and_is_reproducible(
    mos: MemoryOS, cube: str, tmp_path: Path
) -> None:
    mos.export(cube, tmp_path / "dir", user_id="ann")
    mos.export(cube, tmp_path / "cube.tar.gz", user_id="ann")
    with tarfile.open(tmp_path / "cube.tar.gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["cube.json", *FILES, "artifacts/000001.kv"]
        assert all(m.isreg() for m in members)
        for m in members[1:]:
            content = tar.extractfile(m)
            assert content is not None
            assert content.read() == (tmp_path / "dir" / m.name).read_bytes()
    data = mos.store.read_cube(cube)
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    write_cube(data, tmp_path / "a.tar.gz", now=when)
    write_cube(data, tmp_path / "b.tar.gz", now=when)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()


def test_an_export_never_overwrites(mos: MemoryOS, cube: str, tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    (tmp_path / "taken.tar.gz").write_text("mine")
    (tmp_path / "file").write_text("mine")
    for target in (full, tmp_path / "taken.tar.gz", tmp_path / "file", tmp_path / "no/such/dir"):
        with pytest.raises(MemCubeError):
            mos.export(cube, target, user_id="ann")
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert (tmp_path / "taken.tar.gz").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".memcube-")]
    (tmp_path / "empty").mkdir()
    mos.export(cube, tmp_path / "empty", user_id="ann")  # an empty directory is filled
    assert (tmp_path / "empty" / "cube.json").is_file()


def test_an_export_needs_admin_on_the_cube(mos: MemoryOS, cube: str, tmp_path: Path) -> None:
    with pytest.raises(PermissionDenied):
        mos.export(cube, tmp_path / "out", user_id="bob")  # bob may only read
    with pytest.raises(CubeNotFound):
        mos.export("nope", tmp_path / "out", user_id="ann")
    assert not (tmp_path / "out").exists()


def test_an_export_refuses_a_cube_it_cannot_write_whole(
    mos: MemoryOS, cube: str, tmp_path: Path
) -> None:
    (tmp_path / "stable-context.kv").unlink()  # the artifact's file is gone
    with pytest.raises(MemCubeError, match="artifact 'kv-1'"):
        mos.export(cube, tmp_path / "out", user_id="ann")
    with mos.store.transaction() as conn:  # type: ignore[attr-defined]
        conn.execute("DELETE FROM artifacts")
        conn.execute("UPDATE vectors SET embedder = 'older-model/384' WHERE rid = 1")
    with pytest.raises(ConfigurationError, match="re-embed"):
        mos.export(cube, tmp_path / "out", user_id="ann")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".memcube-")]


def test_an_empty_cube_round_trips(mos: MemoryOS, other: MemoryOS, tmp_path: Path) -> None:
    mos.create_user("ann")
    mos.create_cube("empty", owner="ann", cube_id="empty", kind="session")
    mos.export("empty", tmp_path / "empty.tar.gz", user_id="ann")
    imported = other.import_cube(tmp_path / "empty.tar.gz", owner="ann")
    assert (imported.cube_id, imported.kind) == ("empty", "session")
    other.export("empty", tmp_path / "again", user_id="ann")
    assert np.load(tmp_path / "again" / "vectors.npy", allow_pickle=False).shape == (0, 384)
    assert lines(tmp_path / "again" / "items.jsonl") == []
    other.add("now it has a turn", user_id="ann", cube_id="empty")
    assert other.search("turn", user_id="ann")


# -- import: the round trip ------------------------------------------------------------------


def test_import_then_export_round_trips_to_identical_files(
    mos: MemoryOS, other: MemoryOS, cube: str, tmp_path: Path
) -> None:
    """Restored by an administrator with kept ids and the same owner, the re-export equals the
    export byte for byte, except ``exported_at``, and the one ``import`` event the import
    appends (with the count and checksum of events.jsonl that follow from it)."""
    first, second = tmp_path / "first", tmp_path / "second"
    mos.export(cube, first, user_id="ann")
    mos.export(cube, tmp_path / "first.tar.gz", user_id="ann")
    imported = other.import_cube(tmp_path / "first.tar.gz", owner="ann", by="root")
    assert (imported.cube_id, imported.owner, imported.kind) == ("notes", "ann", "agent")
    other.export("notes", second, user_id="ann")

    for name in FILES:
        if name not in ("events.jsonl", "artifacts.jsonl"):
            assert (first / name).read_bytes() == (second / name).read_bytes(), name
    # the KV cache is model state: never imported (issue 24, finding 4), made again by a chat
    assert lines(first / "artifacts.jsonl") and lines(second / "artifacts.jsonl") == []
    old_events = (first / "events.jsonl").read_bytes()
    new_events = (second / "events.jsonl").read_bytes()
    assert new_events.startswith(old_events)
    (added,) = lines(second / "events.jsonl")[len(lines(first / "events.jsonl")) :]
    assert (added["op"], added["actor"], added["item_id"]) == ("import", "root", None)
    assert added["after"] == {
        "from_cube_id": "notes", "format_version": 1, "items": manifest(first)["counts"]["items"],
        "ids": "kept", "reembedded": False, "claims": "kept", "other_users": ["ann"],
        "other_user_count": 1, "artifacts_dropped": {"kv_cache": 1},
    }  # fmt: skip
    a, b = manifest(first), manifest(second)
    assert b["counts"]["events"] == a["counts"]["events"] + 1
    assert b["sha256"]["events.jsonl"] == sha256(second / "events.jsonl")
    assert (a["counts"]["artifacts"], b["counts"]["artifacts"]) == (1, 0)
    for m in (a, b):
        del m["exported_at"], m["counts"]["events"], m["sha256"]["events.jsonl"]
        del m["counts"]["artifacts"], m["sha256"]["artifacts.jsonl"]
    del a["sha256"]["artifacts/000001.kv"]
    assert a == b


def test_an_imported_cube_works_like_the_original(
    mos: MemoryOS, other: MemoryOS, cube: str, tmp_path: Path
) -> None:
    mos.export(cube, tmp_path / "out", user_id="ann")
    other.create_user("bob")
    other.import_cube(tmp_path / "out", owner="ann", by="root")
    assert other.store.permission("notes", "ann") == "admin"
    assert other.store.permission("notes", "bob") is None  # grants are not imported
    edited = next(i for i in mos.list_memories(cube, user_id="ann") if i.text.startswith("I still"))
    assert other.history(edited.id, user_id="ann") == mos.history(edited.id, user_id="ann")
    assert other.get(edited.id, user_id="ann") == edited
    for query in ("Where does Ann live?", "hiking"):
        want = [h.item.id for h in mos.search(query, user_id="ann", cube_ids=[cube])]
        assert [h.item.id for h in other.search(query, user_id="ann")] == want
    (added,) = other.add("Ann now lives in Braga", user_id="ann", cube_id="notes")
    assert other.search("Braga", user_id="ann")[0].item.id == added  # the change sequence moved on
    # the KV cache is model state: not imported, no file placed (issue 24, finding 4)
    assert other.store.artifacts("notes") == []
    assert not (tmp_path / "other.db.artifacts").exists()


def test_import_with_new_ids_rewrites_every_reference(
    mos: MemoryOS, cube: str, tmp_path: Path
) -> None:
    """(An administrator's import, so that ids are all that changes: see test_import_identity
    for what anyone else's import changes.)"""
    first, copy = tmp_path / "first", tmp_path / "copy"
    mos.create_user("root", role="admin")
    mos.export(cube, first, user_id="ann")
    imported = mos.import_cube(first, owner="bob", by="root", keep_ids=False)
    assert imported.cube_id != cube and imported.owner == "bob"
    mos.export(imported.cube_id, copy, user_id="bob")
    old = [i["id"] for i in lines(first / "items.jsonl")]
    new = [i["id"] for i in lines(copy / "items.jsonl")]
    assert not set(old) & set(new)
    mapping = dict(zip(old, new, strict=True))  # new ids keep the old order

    def renamed(text: str) -> str:
        for old_id, new_id in mapping.items():
            text = text.replace(old_id, new_id)
        return text

    for name in ("items.jsonl", "vectors.ids.json"):
        assert renamed((first / name).read_text()) == (copy / name).read_text()
    assert (first / "vectors.npy").read_bytes() == (copy / "vectors.npy").read_bytes()
    events = (copy / "events.jsonl").read_text()
    assert events.startswith(renamed((first / "events.jsonl").read_text()))
    assert lines(copy / "artifacts.jsonl") == []  # the KV cache is model state: left out
    references = [
        ref
        for item in lines(copy / "items.jsonl")
        for ref in [
            item["merged_into"],
            item["segment_id"],
            *(s.get("item_id") for s in item["sources"]),
        ]
        if ref is not None
    ]
    assert references and set(references) <= set(new)
    # the original is untouched, and both cubes answer alike
    mos.export(cube, tmp_path / "again", user_id="ann")
    for name in FILES:
        assert (first / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    hits = mos.search("hiking", user_id="bob", cube_ids=[imported.cube_id])
    assert hits and all(h.item.cube_id == imported.cube_id for h in hits)


def test_taken_ids_are_refused_and_change_nothing(mos: MemoryOS, cube: str, tmp_path: Path) -> None:
    """An administrator's restore keeps ids, so a taken one is refused (and named: an
    administrator may read every event, ids included)."""
    mos.create_user("root", role="admin")
    mos.export(cube, tmp_path / "out", user_id="ann")
    before = counts(mos)
    with pytest.raises(AlreadyExists, match="cube 'notes'"):
        mos.import_cube(tmp_path / "out", owner="ann")
    with pytest.raises(AlreadyExists, match=r"item '.*remap-ids"):  # new cube id, taken items
        mos.import_cube(tmp_path / "out", owner="ann", by="root", cube_id="copy")
    assert counts(mos) == before
    assert not (tmp_path / "memory.db.artifacts").exists()


def test_import_checks_its_arguments(mos: MemoryOS, cube: str, tmp_path: Path) -> None:
    mos.export(cube, tmp_path / "out", user_id="ann")
    before = counts(mos)
    with pytest.raises(UserNotFound):
        mos.import_cube(tmp_path / "out", owner="nobody", keep_ids=False)
    with pytest.raises(UserNotFound):
        mos.import_cube(tmp_path / "out", owner="ann", by="nobody", keep_ids=False)
    with pytest.raises(AdminRequired):  # only an administrator imports for someone else
        mos.import_cube(tmp_path / "out", owner="ann", by="bob", keep_ids=False)
    with pytest.raises(ValidationError):
        mos.import_cube(tmp_path / "out", owner="ann", cube_id="../bad")
    with pytest.raises(ValidationError):
        mos.import_cube(tmp_path / "out", owner="ann", keep_ids="no")  # type: ignore[arg-type]
    assert counts(mos) == before


# -- import: embedders and versions ----------------------------------------------------------


def foreign(root: Path, dim: int = 8) -> None:
    """Make the MemCube at ``root`` look written by another embedder (``other-model/dim``)."""
    ids = json.loads((root / "vectors.ids.json").read_text())
    vectors = np.random.default_rng(0).normal(size=(len(ids), dim)).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), allow_pickle=False)
    rewrite(root, "vectors.npy", buffer.getvalue())
    edit_manifest(
        root, lambda m: m.update(embedder={"fingerprint": f"other-model/{dim}", "dim": dim})
    )


def test_another_embedder_is_refused_unless_reembed(
    other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    foreign(exported)
    before = counts(other)
    with pytest.raises(ConfigurationError, match="other-model/8"):
        other.import_cube(tmp_path / "out", owner="ann")
    assert counts(other) == before
    imported = other.import_cube(tmp_path / "out", owner="ann", by="root", reembed=True)
    assert imported.embedder == fingerprint(other.embedder)
    ids = json.loads((tmp_path / "out" / "vectors.ids.json").read_text())
    items = other.store.get_items(ids, [imported.cube_id])
    expected = other.embedder.embed_passages([embedding_text(i) for i in items])
    assert np.allclose(other.store.get_vectors(ids, [imported.cube_id]), expected, atol=1e-6)
    assert other.search("Where does Ann live?", user_id="ann")


def test_a_format_version_from_the_future_is_refused(
    other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    edit_manifest(tmp_path / "out", lambda m: m.update(format_version=2, novelty={"x": 1}))
    before = counts(other)
    for reembed in (False, True):
        with pytest.raises(ConfigurationError, match=r"format version 2.*upgrade memstrata"):
            other.import_cube(tmp_path / "out", owner="ann", reembed=reembed)
    assert counts(other) == before


def test_the_memcube_written_by_another_tool_in_the_docs_imports(
    other: MemoryOS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/memcube.md's writer: required fields only, no vectors, events or artifacts."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "memcube.md").read_text()
    section = docs.split("## Writing one from another tool", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/memcube.md", "exec"), {})
    imported = other.import_cube(tmp_path / "facts-memcube", owner="ann", by="root")
    assert imported.settings == {} and imported.embedder == fingerprint(other.embedder)
    (stored,) = other.list_memories("facts", user_id="ann")
    assert (stored.id, stored.text, stored.keywords) == ("fact-1", "Ann lives in Porto", [])
    assert other.search("Porto", user_id="ann")[0].item.id == "fact-1"  # by keyword, no vector
    copy = other.import_cube(tmp_path / "facts-memcube", owner="ann", cube_id="f2",
                       keep_ids=False, reembed=True)  # fmt: skip
    (item,) = other.list_memories(copy.cube_id, user_id="ann")
    assert other.store.get_vectors([item.id], [copy.cube_id]).shape == (
        1,
        384,
    )  # reembed gave it a vector
    (hit,) = other.search("Where does she reside?", user_id="ann", cube_ids=["f2"])
    assert hit.ranks["dense"] == 1 and "keyword" not in hit.ranks  # found by its vector only


# -- bad input changes nothing ---------------------------------------------------------------


def _bad_line(root: Path) -> None:
    text = (root / "items.jsonl").read_bytes().splitlines(keepends=True)
    rewrite(root, "items.jsonl", b"".join([*text[:2], b'{"id": "x",\n', *text[2:]]))


def _bad_field(root: Path) -> None:
    items = lines(root / "items.jsonl")
    items[1]["tier"] = "attic"
    rewrite(root, "items.jsonl", "".join(json.dumps(i) + "\n" for i in items).encode())


def _lone_surrogate(root: Path) -> None:
    """A ``\\udfff`` escape in a metadata value: valid JSON, no text (a pair, an emoji, is fine)."""
    items = lines(root / "items.jsonl")
    items[0]["metadata"]["note"] = "fine \U0001f600"
    items[1]["metadata"]["note"] = "x\udfff"
    text = "".join(json.dumps(i) + "\n" for i in items)  # ASCII: every surrogate escaped
    rewrite(root, "items.jsonl", text.encode())


def _pickled_vectors(root: Path) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    rewrite(root, "vectors.npy", buffer.getvalue())


def _symlinked_file(root: Path) -> None:
    (root / "items.jsonl").unlink()
    (root / "items.jsonl").symlink_to("/etc/hostname")


def _wrong_count(root: Path) -> None:
    edit_manifest(root, lambda m: m["counts"].__setitem__("events", 1))


def _stray_vector(root: Path) -> None:
    ids = json.loads((root / "vectors.ids.json").read_text())
    rewrite(root, "vectors.ids.json", json.dumps(["not-an-item", *ids[1:]]).encode())


CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "bad JSON line": (_bad_line, "items.jsonl line 3 is not valid JSON"),
    "truncated file": (
        lambda r: rewrite(r, "events.jsonl", (r / "events.jsonl").read_bytes()[:-40], fix_checksum=False),
        "events.jsonl does not match its SHA-256",
    ),
    "flipped byte": (
        lambda r: rewrite(r, "vectors.npy", (r / "vectors.npy").read_bytes()[:-1] + b"\x00", fix_checksum=False),
        "vectors.npy does not match its SHA-256",
    ),
    "missing file": (lambda r: (r / "vectors.ids.json").unlink(), "no file 'vectors.ids.json'"),
    "missing artifact": (lambda r: (r / "artifacts/000001.kv").unlink(), "no file 'artifacts/000001.kv'"),
    "missing manifest": (lambda r: (r / "cube.json").unlink(), "cube.json is missing"),
    "unlisted file": (lambda r: (r / "notes.txt").write_text("hi"), "unexpected entry 'notes.txt'"),
    "bad field": (_bad_field, "items.jsonl line 2: field 'tier' must be one of working, mid, long"),
    "pickled vectors": (_pickled_vectors, "vectors.npy is not a usable vector matrix"),
    "lone surrogate": (_lone_surrogate, "items.jsonl line 2 holds a lone surrogate"),
    "symlinked file": (_symlinked_file, "unexpected entry 'items.jsonl'"),
    "wrong count": (_wrong_count, "counts 1 events"),
    "stray vector": (_stray_vector, "names 'not-an-item'"),
    "not a memcube": (lambda r: edit_manifest(r, lambda m: m.update(format="zip")), "does not say format"),
    "manifest not JSON": (lambda r: (r / "cube.json").write_text("{"), "cube.json is missing or not valid JSON"),
}  # fmt: skip


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_memcube_is_refused_and_changes_nothing(
    corruption: str, other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    damage, message = CORRUPTIONS[corruption]
    root = exported
    damage(root)
    before = counts(other)
    with pytest.raises(MemCubeError, match=message.replace("(", r"\(")):
        other.import_cube(root, owner="ann")
    # the same MemCube as a tar is refused as well
    with tarfile.open(tmp_path / "out.tar", "w") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file() or path.is_symlink():
                tar.add(path, path.relative_to(root).as_posix())
    with pytest.raises(MemCubeError):
        other.import_cube(tmp_path / "out.tar", owner="ann")
    assert counts(other) == before
    assert not (tmp_path / "other.db.artifacts").exists()


def test_a_truncated_or_foreign_archive_is_refused(
    other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    with tarfile.open(tmp_path / "cube.tar.gz", "w:gz") as tar:
        for path in sorted(exported.rglob("*")):
            tar.add(path, path.relative_to(exported).as_posix(), recursive=False)
    other.import_cube(tmp_path / "cube.tar.gz", owner="ann", cube_id="whole")  # whole, it works
    whole = (tmp_path / "cube.tar.gz").read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "cut-header.tar.gz").write_bytes(whole[:100])
    (tmp_path / "text.tar.gz").write_text("not an archive")
    before = counts(other)
    for name in ("cut.tar.gz", "cut-header.tar.gz", "text.tar.gz", "missing.tar.gz"):
        with pytest.raises(MemCubeError):
            other.import_cube(tmp_path / name, owner="ann")
    assert counts(other) == before


def _member(name: str, data: bytes = b"x", **fields: Any) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data) if fields.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data if info.isreg() else None


def _malicious(outside: Path) -> dict[str, list[tuple[tarfile.TarInfo, bytes | None]]]:
    """Extra members, each trying to write (or read) outside the extraction directory."""
    up = f"../memcube-escape-{uuid.uuid4().hex}"
    return {
        "dot-dot": [_member(up)],
        "dot-dot in artifacts": [_member(f"artifacts/../../{Path(up).name}")],
        "absolute": [_member(str(outside / "absolute"))],
        "symlink out": [_member("artifacts/link", type=tarfile.SYMTYPE, linkname=str(outside))],
        "symlinked dir": [
            _member("artifacts", type=tarfile.SYMTYPE, linkname=str(outside)),
            _member("artifacts/000002.kv"),
        ],
        "hardlink out": [_member("artifacts/hard", type=tarfile.LNKTYPE, linkname="/etc/hostname")],
        "hardlink up": [_member("artifacts/hard", type=tarfile.LNKTYPE, linkname=up)],
        "device": [_member("artifacts/dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)],
        "fifo": [_member("artifacts/fifo", type=tarfile.FIFOTYPE)],
        "duplicate": [_member("items.jsonl", b"{}\n")],
        "nested dir": [_member("artifacts/deeper/x")],
    }


@pytest.mark.parametrize("attack", list(_malicious(Path("/x"))))
def test_a_malicious_archive_is_refused_and_writes_nothing_outside(
    attack: str, other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    root, outside = exported, tmp_path / "outside"
    outside.mkdir()
    extra = _malicious(outside)[attack]
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(path, path.relative_to(root).as_posix())
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    before, temp = counts(other), Path(tempfile.gettempdir())
    unpacked = set(temp.glob("memstrata-memcube-*"))
    with pytest.raises(MemCubeError):
        other.import_cube(archive, owner="ann")
    assert counts(other) == before
    assert list(outside.iterdir()) == []
    for info, _ in extra:
        if "memcube-escape-" in info.name or "memcube-escape-" in info.linkname:
            name = Path(info.name if "escape" in info.name else info.linkname).name
            assert not (temp / name).exists()
    assert set(temp.glob("memstrata-memcube-*")) == unpacked  # the unpacked copy is gone


# -- the format and the CLI ------------------------------------------------------------------


def test_the_format_holds_every_year(tmp_path: Path) -> None:
    """Years 1 to 9999 are written with four digits (``strftime`` writes year 99 as "99" on
    Linux, which ISO 8601 readers refuse) and read back as they were; a time a zone pushes out of
    that range, or one the database would store as seconds that read back past year 9999, is a
    MemCubeError, not a crash (then, or at every later read of the cube)."""
    utc = timezone.utc
    times = [datetime(1, 1, 1, tzinfo=utc), datetime(99, 3, 1, 10, 0, 0, 123456, tzinfo=utc),
             datetime(999, 12, 31, 23, 59, 59, tzinfo=utc),
             datetime(9999, 12, 31, 23, 59, 59, tzinfo=utc)]  # fmt: skip
    items = [
        MemoryItem(id=f"i{n}", cube_id="old", text="x", event_time=t, created_at=t, updated_at=t,
                   valid_from=t, last_accessed_at=t)
        for n, t in enumerate(times)
    ]  # fmt: skip
    data = MemCube(
        cube=Cube("old", "old", "ann", created_at=times[0]), items=items, versions={},
        vector_ids=[], vectors=np.zeros((0, 0), np.float32),
        events=[Event(0, t, "ann", "old", None, "create_cube") for t in times], artifacts=[],
    )  # fmt: skip
    write_cube(data, tmp_path / "old", now=times[1])
    assert (
        '"event_time":"0099-03-01T10:00:00.123456Z"' in (tmp_path / "old/items.jsonl").read_text()
    )
    with open_cube(tmp_path / "old") as back:
        assert back.items == items and [e.at for e in back.events] == times
        assert back.cube.created_at == times[0]
    text = (tmp_path / "old/items.jsonl").read_text()
    for old, new in (
        ("0001-01-01T00:00:00.000000Z", "0001-01-01T00:00:00+01:00"),  # year 0 in UTC
        ("9999-12-31T23:59:59.000000Z", "9999-12-31T23:59:59.999999Z"),  # stored: 10000
    ):
        rewrite(tmp_path / "old", "items.jsonl", text.replace(old, new).encode())
        refused = pytest.raises(MemCubeError, match="field 'event_time' must be an ISO 8601")
        with refused, open_cube(tmp_path / "old"):
            pass


#: Artifact kinds an import stores (and so places a file for): those that are not model state.
PLACED = sorted(set(ARTIFACT_KINDS) - MODEL_STATE)


def test_a_kv_cache_in_the_way_is_not_placed(
    other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    """An import places no file of model state (issue 24, finding 4): what is in the way stays."""
    taken = tmp_path / "other.db.artifacts" / "notes" / "kv-1.kv"
    taken.parent.mkdir(parents=True)
    taken.write_bytes(b"in the way")
    other.import_cube(exported, owner="ann", by="root")
    assert taken.read_bytes() == b"in the way" and other.store.artifacts("notes") == []


@pytest.mark.skipif(not PLACED, reason="every artifact kind is model state: none is placed")
def test_a_failed_import_names_no_path_of_the_database(
    other: MemoryOS, exported: Path, tmp_path: Path
) -> None:
    """Where the database and its artifacts live is the server's business, not its clients'."""
    (line,) = lines(exported / "artifacts.jsonl")
    rewrite(exported, "artifacts.jsonl", (json.dumps({**line, "kind": PLACED[0]}) + "\n").encode())
    taken = tmp_path / "other.db.artifacts" / "notes" / "kv-1.kv"
    taken.parent.mkdir(parents=True)
    taken.write_bytes(b"in the way")
    with pytest.raises(
        MemCubeError, match=r"other\.db\.artifacts/notes, beside the database"
    ) as no:
        other.import_cube(exported, owner="ann", by="root")
    assert str(tmp_path) not in no.value.message


def test_the_item_fields_cover_the_model() -> None:
    model = {f.name for f in dataclasses.fields(MemoryItem)} - {"cube_id"}
    assert set(ITEM_FIELDS) == model and len(ITEM_FIELDS) == len(model)


def test_cli_export_and_import(mos: MemoryOS, cube: str, db_path: Path, tmp_path: Path) -> None:
    runner = CliRunner()

    def run(*args: str) -> Any:
        result = runner.invoke(cli, ["--db", str(db_path), "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    archive = str(tmp_path / "notes.tar.gz")
    done = run("export", "notes", archive, "--user", "ann")
    assert done["counts"]["artifacts"] == 1 and done["format_version"] == 1
    copy = run("import", archive, "--owner", "bob", "--cube-id", "copy", "--remap-ids")
    assert (copy["cube_id"], copy["owner"]) == ("copy", "bob")
    failed = runner.invoke(cli, ["--db", str(db_path), "export", "notes", archive, "--user", "ann"])
    assert (
        failed.exit_code == 1
        and failed.stderr.startswith("error: ")
        and "already exists" in failed.stderr
    )
    failed = runner.invoke(cli, ["--db", str(db_path), "import", archive, "--owner", "ann"])
    assert failed.exit_code == 1 and "cube 'notes' already exists" in failed.stderr


def test_cli_import_acts_as_user(mos: MemoryOS, cube: str, db_path: Path, tmp_path: Path) -> None:
    """``--user``: who imports (default the owner).  An administrator's import for another owner
    keeps who said what; a user's own import is a copy that user authors; only an administrator
    imports for someone else."""
    mos.create_user("root", role="admin")
    archive = str(tmp_path / "notes.tar.gz")
    mos.export(cube, archive, user_id="ann")
    runner = CliRunner()

    def authors(*args: str) -> set[str | None]:
        result = runner.invoke(cli, ["--db", str(db_path), "--json", "import", archive, *args])
        assert result.exit_code == 0, result.output
        cube_id = json.loads(result.stdout)["cube_id"]
        return {i.user_id for i in mos.list_memories(cube_id, user_id="bob", limit=1000)}

    assert "ann" in authors("--owner", "bob", "--user", "root", "--cube-id", "restored",
                            "--remap-ids")  # fmt: skip
    assert authors("--owner", "bob", "--user", "bob", "--cube-id", "bobs") <= {"bob", None}
    assert authors("--owner", "bob", "--cube-id", "bobs-too") <= {"bob", None}
    refused = runner.invoke(cli, ["--db", str(db_path), "import", archive, "--owner", "ann",
                                  "--user", "bob", "--cube-id", "for-ann"])  # fmt: skip
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: user 'bob' is not an administrator")
    assert "for-ann" not in {c.cube_id for c in mos.list_cubes(user_id="ann")}


def test_an_archive_that_unpacks_too_large_is_refused(
    other: MemoryOS, exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tarfile.open(tmp_path / "cube.tar.gz", "w:gz") as tar:
        for path in sorted(exported.rglob("*")):
            tar.add(path, path.relative_to(exported).as_posix(), recursive=False)
    size = sum(p.stat().st_size for p in exported.rglob("*") if p.is_file())
    monkeypatch.setattr("memstrata.memcube.files.MAX_UNPACKED_BYTES", size - 1)
    before = counts(other)
    with pytest.raises(MemCubeError, match="unpacks to more than"):
        other.import_cube(tmp_path / "cube.tar.gz", owner="ann")
    assert counts(other) == before
    monkeypatch.setattr("memstrata.memcube.files.MAX_UNPACKED_BYTES", size)
    assert other.import_cube(tmp_path / "cube.tar.gz", owner="ann").owner == "ann"
