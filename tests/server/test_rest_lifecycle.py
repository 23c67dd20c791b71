"""Lifecycle and governance over HTTP: transitions, as_of reads and searches, rollback, audit,
erasure, sharing and revocation, MemCube export and import."""

from __future__ import annotations

import io
import tarfile
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import httpx
import pytest

from memstrata.lifecycle.states import INCLUDABLE
from memstrata.memory.kinds import KINDS, SearchInclude

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account, Server

    NewUser = Callable[..., Account]
    OwnerCube = tuple[Account, str]

FUTURE = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()


def _code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def _first_item(owner: Account, cube_id: str) -> str:
    item_id: str = owner.http.get(f"/memories/{cube_id}").json()[0]["id"]
    return item_id


def _hit_ids(http: httpx.Client, **body: Any) -> list[str]:
    response = http.post("/search", json=body)
    assert response.status_code == 200, response.text
    return [h["id"] for h in response.json()["hits"]]


# -- transitions and the time machine ----------------------------------------------------------


def test_transitions_follow_the_lifecycle(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    item_id = _first_item(owner, cube_id)
    path = f"/memories/{cube_id}/{item_id}"
    moved = owner.http.post(f"{path}/transition", json={"to": "activated", "reason": "checked"})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["status"], moved.json()["version"]) == ("activated", 2)
    archived = owner.http.post(f"{path}/transition", json={"to": "archived"}).json()
    assert archived["status"] == "archived"
    query = {"query": "moved to Porto", "cube_ids": [cube_id]}
    assert item_id not in _hit_ids(owner.http, **query)
    assert item_id in _hit_ids(owner.http, **query, include=["archived"])
    owner.http.post(f"{path}/transition", json={"to": "activated"})
    frozen = owner.http.post(f"{path}/transition", json={"to": "frozen"}).json()
    assert frozen["status"] == "frozen"
    illegal = owner.http.post(f"{path}/transition", json={"to": "activated"})
    assert _code(illegal) == (409, "conflict")
    assert "frozen" in illegal.json()["error"]["message"]
    assert "hint" in illegal.json()["error"]
    assert _code(owner.http.put(path, json={"text": "changed"})) == (409, "conflict")
    history = owner.http.get(f"{path}/history").json()
    assert [(v["item"]["status"], v["reason"]) for v in history][:2] == [
        ("generated", None),
        ("activated", "checked"),
    ]


def test_transition_refuses_bad_input(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    item_id = _first_item(owner, cube_id)
    path = f"/memories/{cube_id}/{item_id}/transition"
    assert _code(owner.http.post(path, json={"to": "archived"})) == (409, "conflict")
    assert _code(owner.http.post(path, json={"to": "deleted"})) == (422, "invalid_input")
    assert _code(owner.http.post(path, json={"to": "gone"})) == (422, "invalid_input")
    assert _code(owner.http.post(path, json={"to": "activated", "x": 1})) == (422, "invalid_input")
    missing = f"/memories/{cube_id}/no-such-item/transition"
    assert _code(owner.http.post(missing, json={"to": "activated"})) == (404, "not_found")
    reader = new_user("reader")
    owner.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": reader.user_id})
    assert _code(reader.http.post(path, json={"to": "activated"})) == (403, "permission_denied")
    assert owner.http.get(f"/memories/{cube_id}/{item_id}").json()["status"] == "generated"


def test_get_and_search_as_of_a_past_time(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    item_id = _first_item(owner, cube_id)
    path = f"/memories/{cube_id}/{item_id}"
    time.sleep(0.01)
    owner.http.put(path, json={"text": "I moved to Lisbon last spring."})
    first, second = (
        datetime.fromisoformat(v["at"]) for v in owner.http.get(f"{path}/history").json()
    )
    between = (first + (second - first) / 2).isoformat()
    then = owner.http.get(path, params={"as_of": between})
    assert then.status_code == 200, then.text
    assert (then.json()["text"], then.json()["version"]) == ("I moved to Porto last spring.", 1)
    assert owner.http.get(path, params={"as_of": second.timestamp()}).json()["version"] == 2
    hits = owner.http.post(
        "/search", json={"query": "Porto", "cube_ids": [cube_id], "as_of": between}
    ).json()["hits"]
    assert [h["text"] for h in hits if h["id"] == item_id] == ["I moved to Porto last spring."]
    assert [h["cube_id"] for h in hits] == [cube_id] * len(hits)
    later = owner.http.post("/memories", json={"cube_id": cube_id, "memory_content": "Later."})
    later_id = later.json()["ids"][0]
    before_it = owner.http.get(f"/memories/{cube_id}/{later_id}", params={"as_of": between})
    assert _code(before_it) == (404, "not_found")


def test_search_may_include_exactly_the_states_it_leaves_out_and_the_kinds() -> None:
    assert get_args(SearchInclude) == INCLUDABLE + KINDS


def test_as_of_in_the_future_or_before_the_cube_is_refused(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    path = f"/memories/{cube_id}/{_first_item(owner, cube_id)}"
    for when in (FUTURE, "2000-01-01T00:00:00Z", "yesterday"):
        assert _code(owner.http.get(path, params={"as_of": when})) == (422, "invalid_input")
        search = {"query": "Porto", "cube_ids": [cube_id], "as_of": when}
        assert _code(owner.http.post("/search", json=search)) == (422, "invalid_input")
    future = owner.http.get(path, params={"as_of": FUTURE}).json()["error"]
    assert "future" in future["message"]
    bad_include = {"query": "Porto", "include": ["deleted"]}
    assert _code(owner.http.post("/search", json=bad_include)) == (422, "invalid_input")


def test_rollback(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    item_id = _first_item(owner, cube_id)
    path = f"/memories/{cube_id}/{item_id}"
    owner.http.put(path, json={"text": "I moved to Lisbon last spring."})
    back = owner.http.post(f"{path}/rollback", json={"version": 1})
    assert back.status_code == 200, back.text
    assert (back.json()["text"], back.json()["version"]) == ("I moved to Porto last spring.", 3)
    history = owner.http.get(f"{path}/history").json()
    assert [v["reason"] for v in history] == [None, None, "rollback to version 1"]
    assert _first_hit_text(owner.http, cube_id, "Porto") == "I moved to Porto last spring."
    missing = owner.http.post(f"{path}/rollback", json={"version": 99})
    assert _code(missing) == (404, "not_found")
    assert "hint" in missing.json()["error"]
    assert _code(owner.http.post(f"{path}/rollback", json={"version": 0})) == (422, "invalid_input")
    assert _code(owner.http.post(f"{path}/rollback", json={})) == (422, "invalid_input")
    owner.http.post(f"{path}/transition", json={"to": "activated"})
    owner.http.post(f"{path}/transition", json={"to": "frozen"})
    frozen = owner.http.post(f"{path}/rollback", json={"version": 2, "reason": "undo"})
    assert _code(frozen) == (409, "conflict")
    assert owner.http.get(path).json()["text"] == "I moved to Porto last spring."


def _first_hit_text(http: httpx.Client, cube_id: str, query: str) -> str:
    hits = http.post("/search", json={"query": query, "cube_ids": [cube_id]}).json()["hits"]
    text: str = hits[0]["text"]
    return text


# -- audit -------------------------------------------------------------------------------------


def test_audit_for_a_cube_admin_and_an_administrator(
    owner_cube: OwnerCube, new_user: NewUser, admin: httpx.Client
) -> None:
    owner, cube_id = owner_cube
    item_id = _first_item(owner, cube_id)
    owner.http.post(
        f"/memories/{cube_id}/{item_id}/transition", json={"to": "activated", "reason": "seen"}
    )
    events = owner.http.get("/audit", params={"cube_id": cube_id})
    assert events.status_code == 200, events.text
    ops = [e["op"] for e in events.json()]
    assert "transition" in ops
    assert {e["cube_id"] for e in events.json()} == {cube_id}
    seqs = [e["seq"] for e in events.json()]
    assert seqs == sorted(seqs)
    mine = owner.http.get("/audit", params={"item_id": item_id}).json()
    assert {e["item_id"] for e in mine} == {item_id}
    moved = next(e for e in mine if e["op"] == "transition")
    assert (moved["actor"], moved["reason"]) == (owner.user_id, "seen")
    since = owner.http.get("/audit", params={"cube_id": cube_id, "since": moved["at"]}).json()
    assert moved["seq"] in [e["seq"] for e in since]
    assert len(since) < len(events.json())
    one = owner.http.get("/audit", params={"cube_id": cube_id, "limit": 1}).json()
    assert len(one) == 1
    everything = admin.get("/audit", params={"limit": 5})
    assert everything.status_code == 200 and len(everything.json()) == 5
    recent = admin.get("/audit", params={"since": moved["at"]}).json()
    assert moved in recent


def test_audit_is_refused_to_non_admins(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    reader = new_user("reader")
    owner.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": reader.user_id})
    item_id = _first_item(owner, cube_id)
    denied = [
        owner.http.get("/audit"),
        reader.http.get("/audit"),
        reader.http.get("/audit", params={"cube_id": cube_id}),
    ]
    assert [_code(r) for r in denied] == [(403, "permission_denied")] * len(denied)
    assert _code(reader.http.get("/audit", params={"item_id": item_id}))[0] in (403, 404)
    bad = [
        owner.http.get("/audit", params={"cube_id": cube_id, "limit": 0}),
        owner.http.get("/audit", params={"cube_id": cube_id, "limit": 10_001}),
        owner.http.get("/audit", params={"cube_id": cube_id, "since": "soon"}),
    ]
    assert [_code(r) for r in bad] == [(422, "invalid_input")] * len(bad)


# -- erasure -----------------------------------------------------------------------------------


def test_erase_an_item_a_session_and_a_cube(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    item_id = _first_item(owner, cube_id)
    erased = owner.http.post("/erase", json={"memory_id": item_id, "reason": "asked"})
    assert erased.status_code == 200, erased.text
    assert erased.json()["erased"] >= 1
    tombstone = owner.http.get(f"/memories/{cube_id}/{item_id}").json()
    assert (tombstone["status"], tombstone["text"]) == ("deleted", "")
    assert item_id not in _hit_ids(owner.http, query="Porto", cube_ids=[cube_id])
    session = [{"role": "user", "content": "A secret plan."}, {"role": "user", "content": "More."}]
    owner.http.post("/memories", json={"cube_id": cube_id, "session_id": "s9", "messages": session})
    by_session = owner.http.post("/erase", json={"cube_id": cube_id, "session_id": "s9"}).json()
    assert by_session["erased"] >= 2
    assert owner.http.get(f"/memories/{cube_id}", params={"session_id": "s9"}).json() == []
    whole = owner.http.post("/erase", json={"mem_cube_id": cube_id}).json()
    assert whole["erased"] >= 1
    assert _code(owner.http.get(f"/mem_cubes/{cube_id}")) == (404, "not_found")


def test_erase_a_subject_and_bad_erasures(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    writer = new_user("writer")
    owner.http.post(
        f"/mem_cubes/{cube_id}/share", json={"user_id": writer.user_id, "permission": "write"}
    )
    said = writer.http.post("/memories", json={"cube_id": cube_id, "memory_content": "W's note"})
    note = said.json()["ids"][0]
    refused = [
        writer.http.post("/erase", json={"subject_user_id": owner.user_id}),
        writer.http.post("/erase", json={"cube_id": cube_id}),
    ]
    assert [_code(r) for r in refused] == [(403, "permission_denied")] * len(refused)
    bad = [
        owner.http.post("/erase", json={}),
        owner.http.post("/erase", json={"item_id": note, "subject_user_id": writer.user_id}),
        owner.http.post("/erase", json={"session_id": "s1"}),
        owner.http.post("/erase", json={"item_id": note, "user": "x"}),
    ]
    assert [_code(r) for r in bad] == [(422, "invalid_input")] * len(bad)
    assert _code(owner.http.post("/erase", json={"item_id": "nope"})) == (404, "not_found")
    assert owner.http.get(f"/memories/{cube_id}/{note}").json()["text"] == "W's note"
    gone = writer.http.post("/erase", json={"subject_user_id": writer.user_id}).json()
    assert gone["erased"] >= 1
    assert owner.http.get(f"/memories/{cube_id}/{note}").json()["status"] == "deleted"
    assert len(owner.http.get(f"/memories/{cube_id}").json()) == 2


# -- sharing and revocation --------------------------------------------------------------------


def test_share_read_search_and_revoke(owner_cube: OwnerCube, new_user: NewUser) -> None:
    ann, cube_id = owner_cube
    bob = new_user("bob")
    own = bob.http.post("/mem_cubes", json={"name": "bob's"}).json()["cube_id"]
    bob.http.post("/memories", json={"cube_id": own, "memory_content": "I visited Porto once."})
    item_id = _first_item(ann, cube_id)
    assert _code(bob.http.get(f"/memories/{cube_id}/{item_id}")) == (404, "not_found")
    shared = ann.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": bob.user_id})
    assert shared.status_code == 200, shared.text
    grants = ann.http.get(f"/mem_cubes/{cube_id}/grants").json()
    assert {(g["user_id"], g["permission"]) for g in grants} >= {
        (ann.user_id, "admin"),
        (bob.user_id, "read"),
    }
    assert bob.http.get(f"/memories/{cube_id}/{item_id}").json()["text"].startswith("I moved")
    assert len(bob.http.get(f"/memories/{cube_id}").json()) == 2
    hits = bob.http.post("/search", json={"query": "Porto"}).json()["hits"]
    labels = {h["text"]: h["cube_id"] for h in hits}
    assert labels["I moved to Porto last spring."] == cube_id
    assert labels["I visited Porto once."] == own
    refused = [
        bob.http.delete(f"/mem_cubes/{cube_id}/share/{bob.user_id}"),
        bob.http.delete(f"/mem_cubes/{cube_id}/share/{ann.user_id}"),
        bob.http.get(f"/mem_cubes/{cube_id}/grants"),
    ]
    assert [_code(r) for r in refused] == [(403, "permission_denied")] * len(refused)
    revoked = ann.http.delete(f"/mem_cubes/{cube_id}/share/{bob.user_id}")
    assert (revoked.status_code, revoked.content) == (204, b"")
    assert bob.user_id not in [
        g["user_id"] for g in ann.http.get(f"/mem_cubes/{cube_id}/grants").json()
    ]
    assert _code(bob.http.get(f"/memories/{cube_id}/{item_id}")) == (404, "not_found")
    assert _code(bob.http.get(f"/memories/{cube_id}")) == (403, "permission_denied")
    assert _code(bob.http.get(f"/mem_cubes/{cube_id}")) == (403, "permission_denied")
    search = bob.http.post("/search", json={"query": "Porto", "cube_ids": [cube_id]})
    assert _code(search) == (403, "permission_denied")
    after = bob.http.post("/search", json={"query": "Porto"}).json()["hits"]
    assert {h["cube_id"] for h in after} == {own}


def test_revoke_errors(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    bob = new_user("bob")
    revoke = f"/mem_cubes/{cube_id}/share"
    assert _code(owner.http.delete(f"{revoke}/{bob.user_id}")) == (404, "not_found")
    assert _code(owner.http.delete(f"{revoke}/no-such-user")) == (404, "not_found")
    assert _code(owner.http.delete(f"{revoke}/{owner.user_id}")) == (422, "invalid_input")
    missing = owner.http.delete(f"/mem_cubes/no-such-cube/share/{bob.user_id}")
    assert _code(missing) == (404, "not_found")
    assert _code(owner.http.get("/mem_cubes/no-such-cube/grants")) == (404, "not_found")


# -- MemCube export and import -----------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's temporary directory (same process), to check that nothing is left there."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _export(owner: Account, cube_id: str) -> bytes:
    response = owner.http.post(f"/mem_cubes/{cube_id}/export")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/gzip"
    assert f'filename="{cube_id}.tar.gz"' in response.headers["content-disposition"]
    return response.content


def _import(account: Account, archive: bytes, **fields: str) -> httpx.Response:
    files = {"file": ("cube.tar.gz", archive, "application/gzip")}
    return account.http.post("/mem_cubes/import", files=files, data=fields)


def test_export_then_import_a_copy(owner_cube: OwnerCube, new_user: NewUser, scratch: Path) -> None:
    owner, cube_id = owner_cube
    archive = _export(owner, cube_id)
    assert archive[:2] == b"\x1f\x8b"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert "cube.json" in tar.getnames()
    bob = new_user("bob")
    copied = _import(bob, archive, remap_ids="true", cube_id=f"{bob.user_id}-copy")
    assert copied.status_code == 201, copied.text
    cube = copied.json()
    assert (cube["cube_id"], cube["owner"]) == (f"{bob.user_id}-copy", bob.user_id)
    theirs = bob.http.get(f"/memories/{cube['cube_id']}").json()
    mine = owner.http.get(f"/memories/{cube_id}").json()
    assert [i["text"] for i in theirs] == [i["text"] for i in mine]
    assert not {i["id"] for i in theirs} & {i["id"] for i in mine}
    assert "Porto" in _first_hit_text(bob.http, cube["cube_id"], "Porto")
    assert _code(owner.http.get(f"/mem_cubes/{cube['cube_id']}")) == (403, "permission_denied")
    again = _import(bob, archive, remap_ids="true", reembed="true")
    assert again.status_code == 201, again.text
    assert again.json()["cube_id"] not in (cube_id, cube["cube_id"])
    assert list(scratch.iterdir()) == []


def test_export_refusals(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    reader = new_user("reader")
    owner.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": reader.user_id})
    denied = reader.http.post(f"/mem_cubes/{cube_id}/export")
    assert _code(denied) == (403, "permission_denied")
    assert denied.headers["content-type"] == "application/json"
    assert _code(owner.http.post("/mem_cubes/no-such-cube/export")) == (404, "not_found")


def _corrupted(archive: bytes) -> dict[str, bytes]:
    flipped = bytearray(archive)
    middle = len(flipped) // 2
    flipped[middle : middle + 16] = bytes(b ^ 0xFF for b in flipped[middle : middle + 16])
    escape = io.BytesIO()
    with tarfile.open(fileobj=escape, mode="w:gz") as tar:
        info = tarfile.TarInfo("../evil.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    return {
        "flipped": bytes(flipped),
        "truncated": archive[: len(archive) // 2],
        "not an archive": b"hello, not a tarball",
        "escaping member": escape.getvalue(),
    }


def test_a_corrupted_or_clashing_import_changes_nothing(
    owner_cube: OwnerCube, new_user: NewUser, scratch: Path
) -> None:
    owner, cube_id = owner_cube
    archive = _export(owner, cube_id)
    bob = new_user("bob")
    target = f"{bob.user_id}-restored"
    for what, broken in _corrupted(archive).items():
        refused = _import(bob, broken, cube_id=target)
        assert _code(refused) == (400, "memcube_error"), what
        assert str(scratch) not in refused.json()["error"]["message"], what
    assert _code(_import(bob, archive)) == (409, "conflict")  # the cube id is taken
    assert _code(_import(bob, archive, cube_id="bad id!")) == (422, "invalid_input")
    assert _code(_import(bob, archive, remap_ids="perhaps")) == (422, "invalid_input")
    no_file = bob.http.post("/mem_cubes/import", data={"cube_id": target})
    assert _code(no_file) == (422, "invalid_input")
    assert bob.http.get("/mem_cubes").json() == []
    assert _code(bob.http.get(f"/mem_cubes/{target}")) == (404, "not_found")
    assert list(scratch.iterdir()) == []
    # Taken item ids in a cube bob cannot read do not show: his import is a copy with new ids.
    copy = _import(bob, archive, cube_id=target)
    assert copy.status_code == 201, copy.text


def test_an_import_over_the_size_limit_is_refused(new_user: NewUser, server: Server) -> None:
    bob = new_user("bob")
    too_big = _import(bob, b"\0" * (server.memory.settings.max_request_bytes + 1))
    assert _code(too_big) == (413, "payload_too_large")
    assert bob.http.get("/mem_cubes").json() == []
