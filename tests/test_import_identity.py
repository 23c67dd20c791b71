"""An import cannot forge identity, and a subject erasure reaches only what its caller may touch.

Issue 11, findings 3, 4 and 7: a MemCube is a file anyone can write and re-sign (its manifest
holds the SHA-256 of the other files, nothing more), so what it says about who added or changed
what is a claim.  A non-administrator's import is a copy that the importer authors, the claims
kept as ``metadata["origin"]``; an administrator's import is a restore that keeps them.  Ids are
global, so only an administrator's import may keep them (otherwise "already stored" would tell
whether an id exists in a cube the importer cannot read).  Over REST: tests/server/
test_rest_import_identity.py.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memstrata import MemoryOS
from memstrata.errors import (
    AlreadyExists,
    CubeNotFound,
    MemCubeError,
    PermissionDenied,
    ValidationError,
)
from memstrata.memcube import open_cube, rehome, write_cube
from memstrata.model import MemoryItem

pytestmark = pytest.mark.engines("sqlite", "postgres")

TEXTS = ["Bob keeps the spare key under the blue pot.", "Bob's locker code is 4711."]


@pytest.fixture
def people(mos: MemoryOS) -> MemoryOS:
    """Users alice, bob and carol, administrator root; cubes ``alices`` (two of alice's notes)
    and ``bobs`` (bob's notes in ``TEXTS``, one of them updated)."""
    for user in ("alice", "bob", "carol"):
        mos.create_user(user)
    mos.create_user("root", role="admin")
    mos.create_cube("alice's", owner="alice", cube_id="alices")
    mos.add(said("Alice was born in Faro.", "Alice likes figs."), user_id="alice", cube_id="alices")
    mos.create_cube("bob's", owner="bob", cube_id="bobs")
    ids = mos.add(said(TEXTS[0], "Bob's locker code is 1234."), user_id="bob", cube_id="bobs")
    mos.update(ids[1], user_id="bob", text=TEXTS[1], reason="new code")
    return mos


def said(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text} for text in texts]


def forge(source: Path, target: Path, claim: str) -> None:
    """Write at ``target`` the MemCube at ``source`` re-signed so that every item, version and
    event claims ``claim`` (what anyone can do with a text editor and sha256sum)."""
    with open_cube(source) as data:

        def claimed(item: MemoryItem) -> MemoryItem:
            return replace(item, user_id=claim)

        forged = replace(
            data,
            items=[claimed(i) for i in data.items],
            versions={
                k: [replace(v, item=claimed(v.item), actor=claim) for v in stored]
                for k, stored in data.versions.items()
            },
            events=[replace(e, actor=claim) for e in data.events],
        )
        write_cube(forged, target)


def claiming_alice(mos: MemoryOS, folder: Path) -> Path:
    """Bob's cube exported by bob and re-signed to claim alice everywhere."""
    mos.export("bobs", folder / "bobs", user_id="bob")
    forge(folder / "bobs", folder / "claims-alice.tar.gz", "alice")
    return folder / "claims-alice.tar.gz"


def names(mos: MemoryOS, cube_id: str, user_id: str) -> set[str | None]:
    """Every user the cube's items, versions and events name (as its admin ``user_id`` sees)."""
    items = mos.list_memories(cube_id, user_id=user_id)
    found: set[str | None] = {i.user_id for i in items}
    for item in items:
        for version in mos.history(item.id, user_id=user_id):
            found |= {version.actor, version.item.user_id}
    return found | {e.actor for e in mos.audit(by=user_id, cube_id=cube_id)}


def the_import(mos: MemoryOS, cube_id: str) -> dict[str, Any]:
    (event,) = [e for e in mos.audit(by="root", cube_id=cube_id) if e.op == "import"]
    assert event.after is not None
    return {"actor": event.actor, **event.after}


# -- finding 3: an import cannot forge identity ----------------------------------------------------


@pytest.mark.parametrize("keep_ids", [False, True])
def test_a_users_import_takes_the_claims_of_others_as_its_own(
    people: MemoryOS, tmp_path: Path, keep_ids: bool
) -> None:
    mos = people
    archive = claiming_alice(mos, tmp_path)
    copy = mos.import_cube(archive, owner="bob", cube_id="copy", keep_ids=keep_ids)
    assert (copy.cube_id, copy.owner) == ("copy", "bob")
    items = mos.list_memories("copy", user_id="bob")
    assert sorted(i.text for i in items) == sorted(TEXTS)
    assert names(mos, "copy", "bob") <= {"bob", None}  # alice is named nowhere but in origin
    for item in items:
        origin = item.metadata["origin"]
        assert origin.pop("at").endswith("Z")
        assert origin == {
            "cube_id": "bobs", "user_id": "alice", "actors": ["alice"], "imported_by": "bob",
        }  # fmt: skip
        for version in mos.history(item.id, user_id="bob"):
            assert version.item.metadata["origin"]["user_id"] == "alice"  # rollback keeps it
    assert the_import(mos, "copy") == {
        "actor": "bob", "from_cube_id": "bobs", "format_version": 1, "items": 2, "ids": "new",
        "reembedded": False, "claims": "rewritten", "other_users": ["alice"],
        "other_user_count": 1, "artifacts_dropped": {},
    }  # fmt: skip
    # alice's erasure of what she added does not reach bob's copy, which she cannot touch
    assert mos.erase(user_id="alice", subject_user_id="alice") == 2  # her own two notes
    assert sorted(i.text for i in mos.list_memories("copy", user_id="bob")) == sorted(TEXTS)
    assert all(not i.text for i in mos.list_memories("alices", user_id="alice"))


def test_an_administrators_import_keeps_the_claims_and_says_so(
    people: MemoryOS, tmp_path: Path
) -> None:
    mos = people
    archive = claiming_alice(mos, tmp_path)
    kept = mos.import_cube(archive, owner="bob", by="root", cube_id="restored", keep_ids=False)
    assert kept.owner == "bob" and mos.store.permission("restored", "root") is None
    items = mos.list_memories("restored", user_id="bob")
    assert {i.user_id for i in items} == {"alice"} and not any(
        "origin" in i.metadata for i in items
    )
    assert {e.actor for e in mos.audit(by="bob", cube_id="restored") if e.op != "import"} == {
        "alice"
    }
    note = the_import(mos, "restored")
    assert (note["actor"], note["claims"], note["other_users"]) == ("root", "kept", ["alice"])
    # alice, who holds no grant on it, cannot erase it; an administrator can, with one
    # erase_subject event in each cube reached
    assert mos.erase(user_id="alice", subject_user_id="alice") == 2
    assert sorted(i.text for i in mos.list_memories("restored", user_id="bob")) == sorted(TEXTS)
    assert mos.erase(user_id="root", subject_user_id="alice", reason="asked") == 2
    assert all(not i.text for i in mos.list_memories("restored", user_id="bob"))
    for cube_id, count in (("alices", 2), ("restored", 2)):
        marks = [e for e in mos.audit(by="root", cube_id=cube_id) if e.op == "erase_subject"]
        assert [(e.actor, e.after, e.reason) for e in marks][-1] == (
            "root" if cube_id == "restored" else "alice",
            {"subject_user_id": "alice", "items": count},
            "asked" if cube_id == "restored" else None,
        )
    assert mos.erase(user_id="root", subject_user_id="alice") == 0  # nothing left to erase


def test_origin_survives_export_and_import(people: MemoryOS, tmp_path: Path) -> None:
    """Bob's copy (claims taken, origin kept) exported and imported again: a restore keeps its
    origin as it is; carol's copy adds hers, the earlier one kept as ``previous``."""
    mos = people
    mos.import_cube(claiming_alice(mos, tmp_path), owner="bob", cube_id="copy")
    before = {i.text: i.metadata["origin"] for i in mos.list_memories("copy", user_id="bob")}
    mos.export("copy", tmp_path / "copy.tar.gz", user_id="bob")
    mos.import_cube(
        tmp_path / "copy.tar.gz", owner="carol", by="root", cube_id="restore", keep_ids=False
    )
    restored = mos.list_memories("restore", user_id="carol")
    assert {i.text: i.metadata["origin"] for i in restored} == before
    assert {i.user_id for i in restored} == {"bob"}
    mos.import_cube(tmp_path / "copy.tar.gz", owner="carol", cube_id="carols")
    for item in mos.list_memories("carols", user_id="carol"):
        origin = item.metadata["origin"]
        assert item.user_id == "carol"
        assert (origin["user_id"], origin["imported_by"]) == ("bob", "carol")
        assert origin["previous"] == before[item.text]


def test_a_users_own_claims_are_not_touched(people: MemoryOS, tmp_path: Path) -> None:
    mos = people
    mos.export("bobs", tmp_path / "mine", user_id="bob")
    mine = mos.import_cube(tmp_path / "mine", owner="bob", cube_id="mine")
    items = mos.list_memories(mine.cube_id, user_id="bob")
    assert {i.user_id for i in items} == {"bob"} and all(i.metadata == {} for i in items)
    assert the_import(mos, "mine")["other_users"] == []


# -- the reach of a subject erasure ----------------------------------------------------------------


def test_a_users_subject_erasure_reaches_only_cubes_they_may_write(
    people: MemoryOS, tmp_path: Path
) -> None:
    mos = people
    said = {}
    for cube_id, permission in (("writes", "write"), ("reads", "read"), ("shared", "admin")):
        mos.create_cube(cube_id, owner="carol", cube_id=cube_id)
        mos.grant(cube_id, "alice", "write", by="carol")
        said[cube_id] = mos.add(f"alice in {cube_id}", user_id="alice", cube_id=cube_id)[0]
        mos.grant(cube_id, "alice", permission, by="carol")  # "reads": write taken back

    def gone(ids: list[str]) -> list[Any]:
        return mos.store.get_items(ids, ["writes", "reads", "shared"])

    with pytest.raises(PermissionDenied):  # she may read it, not write it
        mos.erase(user_id="alice", subject_user_id="alice", cube_id="reads")
    with pytest.raises(CubeNotFound):
        mos.erase(user_id="alice", subject_user_id="alice", cube_id="no-such-cube")
    assert mos.erase(user_id="alice", subject_user_id="alice") == 4  # alices (2), writes, shared
    (writes, reads, shared) = gone([said["writes"], said["reads"], said["shared"]])
    assert (writes.text, reads.text, shared.text) == ("", "alice in reads", "")
    marks = [e for e in mos.audit(by="carol", cube_id="writes") if e.op == "erase_subject"]
    assert [(e.actor, e.after) for e in marks] == [
        ("alice", {"subject_user_id": "alice", "items": 1})
    ]
    assert mos.erase(user_id="root", subject_user_id="alice", cube_id="reads") == 1
    assert gone([said["reads"]])[0].text == ""


# -- finding 4: no existence oracle ----------------------------------------------------------------


def test_an_import_does_not_tell_whether_an_id_is_stored_in_an_unreadable_cube(
    people: MemoryOS, tmp_path: Path
) -> None:
    """Bob re-signs his MemCube with one item id that is alice's (he cannot read her cube) and
    once with an id nobody uses: the two imports answer alike and keep neither id."""
    mos = people
    theirs = mos.list_memories("alices", user_id="alice")[0].id
    mos.export("bobs", tmp_path / "bobs", user_id="bob")
    with open_cube(tmp_path / "bobs") as data:
        first = data.items[0].id
        for name, taken in (("taken", theirs), ("unused", "01UNUSEDUNUSEDUNUSEDUNUSED")):
            renamed = rehome(data, cube_id="bobs", owner="bob", item_ids={first: taken})
            write_cube(renamed, tmp_path / f"{name}.tar.gz")
    answers = []
    for name in ("taken", "unused"):
        cube = mos.import_cube(tmp_path / f"{name}.tar.gz", owner="bob", cube_id=name)
        ids = {i.id for i in mos.list_memories(name, user_id="bob")}
        assert theirs not in ids and "01UNUSEDUNUSEDUNUSEDUNUSED" not in ids and len(ids) == 2
        answers.append((cube.owner, cube.kind, the_import(mos, name)["ids"]))
    assert answers[0] == answers[1] and answers[0][2] == "new"
    assert mos.get(theirs, user_id="alice").text.startswith("Alice")  # hers is untouched
    with pytest.raises(AlreadyExists, match=theirs):  # an administrator may read every id
        mos.import_cube(tmp_path / "taken.tar.gz", owner="bob", by="root", cube_id="as-root")


# -- finding 7: times before year 1000, and no temporary path in an error --------------------------


def test_times_before_the_year_1000_round_trip(people: MemoryOS, tmp_path: Path) -> None:
    """Every time ``add`` accepts comes back from export and import as it was (whether ``add``
    takes years before 1000 is its own rule: the format holds years 1 to 9999 either way, see
    test_cube's test_the_format_holds_every_year)."""
    mos = people
    times = ["0001-01-01T00:00:00Z", "0099-03-01T10:00:00.123456Z", "0999-12-31T23:59:59Z",
             "1970-01-01T00:00:00Z", "2024-02-29T12:00:00.5Z"]  # fmt: skip
    mos.create_cube("old", owner="bob", cube_id="old")
    when = {}
    for t in times:
        with contextlib.suppress(ValidationError):  # refused by add: nothing to round-trip
            (added,) = mos.add(
                [{"content": f"said at {t}", "timestamp": t}], user_id="bob", cube_id="old"
            )
            when[f"said at {t}"] = mos.get(added, user_id="bob").event_time
    assert "said at 1970-01-01T00:00:00Z" in when
    mos.export("old", tmp_path / "old", user_id="bob")
    written = (tmp_path / "old" / "items.jsonl").read_text()
    assert all(f'"event_time":"{t[:4]}-' in written for t in times if f"said at {t}" in when)
    mos.import_cube(tmp_path / "old", owner="bob", cube_id="copy")
    mos.import_cube(tmp_path / "old", owner="bob", by="root", keep_ids=False, cube_id="restore")
    for cube_id in ("copy", "restore"):
        found = {i.text: i.event_time for i in mos.list_memories(cube_id, user_id="bob")}
        assert found == when


def test_an_import_error_names_no_temporary_path(people: MemoryOS, tmp_path: Path) -> None:
    """A tar holding no cube.json is refused without naming where it was unpacked."""
    archive = tmp_path / "no-manifest.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("items.jsonl")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(MemCubeError) as refused:
        people.import_cube(archive, owner="bob")
    assert "cube.json is missing" in refused.value.message
    assert tempfile.gettempdir() not in refused.value.message
    assert "memstrata-memcube" not in refused.value.message
