"""Issue 11's replay over HTTP: a re-signed MemCube claiming another user, an id probe, and an
upload that fails, against the real server (the SDK side: tests/test_import_identity.py)."""

from __future__ import annotations

import errno
import io
import os
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from memstrata.memcube import open_cube, rehome, write_cube
from memstrata.model import MemoryItem

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account

    NewUser = Callable[..., Account]


def _export(account: Account, cube_id: str, folder: Path) -> Path:
    response = account.http.post(f"/mem_cubes/{cube_id}/export")
    assert response.status_code == 200, response.text
    (folder / "export.tar.gz").write_bytes(response.content)
    return folder / "export.tar.gz"


def _import(account: Account, archive: Path, **fields: str) -> httpx.Response:
    files = {"file": ("cube.tar.gz", archive.read_bytes(), "application/gzip")}
    return account.http.post("/mem_cubes/import", files=files, data=fields)


def _forged(source: Path, claim: str) -> Path:
    """``source`` re-signed so that every item, version and event claims ``claim``."""
    target = source.with_name(f"claims-{claim}.tar.gz")
    with open_cube(source) as data:

        def claimed(item: MemoryItem) -> MemoryItem:
            return replace(item, user_id=claim)

        versions = {
            k: [replace(v, item=claimed(v.item), actor=claim) for v in stored]
            for k, stored in data.versions.items()
        }
        events = [replace(e, actor=claim) for e in data.events]
        items = [claimed(i) for i in data.items]
        write_cube(replace(data, items=items, versions=versions, events=events), target)
    return target


def _items(account: Account, cube_id: str) -> list[dict[str, Any]]:
    response = account.http.get(f"/memories/{cube_id}")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()
    return items


def _bob_and_alice(new_user: NewUser) -> tuple[Account, Account, str]:
    bob, alice = new_user("bob"), new_user("alice")
    cube_id = bob.http.post("/mem_cubes", json={"name": "bob's"}).json()["cube_id"]
    said = [{"role": "user", "content": "Bob's locker code is 4711."}]
    assert bob.http.post("/memories", json={"cube_id": cube_id, "messages": said}).is_success
    alices = alice.http.post("/mem_cubes", json={"name": "alice's"}).json()["cube_id"]
    said = [{"role": "user", "content": "Alice was born in Faro."}]
    assert alice.http.post("/memories", json={"cube_id": alices, "messages": said}).is_success
    return bob, alice, cube_id


def test_a_memcube_claiming_alice_stays_bobs(new_user: NewUser, tmp_path: Path) -> None:
    """Bob re-signs his MemCube to claim alice and imports it with a cube id and new ids (the
    issue's replay); alice's erasure of her data then leaves bob's items where they are.  An
    import keeping ids (the default) is taken over by bob as well."""
    bob, alice, cube_id = _bob_and_alice(new_user)
    archive = _forged(_export(bob, cube_id, tmp_path), alice.user_id)
    copy = _import(bob, archive, cube_id=f"{bob.user_id}-copy", remap_ids="true")
    assert copy.status_code == 201, copy.text
    erased = alice.http.post("/erase", json={"subject_user_id": alice.user_id})
    assert erased.status_code == 200, erased.text
    assert erased.json()["erased"] == 1  # her own note only
    kept = _import(bob, archive, cube_id=f"{bob.user_id}-kept")
    assert kept.status_code == 201, kept.text
    for copy_id in (copy.json()["cube_id"], kept.json()["cube_id"]):
        (item,) = _items(bob, copy_id)
        assert (item["text"], item["status"]) == ("Bob's locker code is 4711.", "generated")
        assert item["user_id"] == bob.user_id
        assert item["metadata"]["origin"]["user_id"] == alice.user_id
        assert item["metadata"]["origin"]["imported_by"] == bob.user_id


def test_an_import_does_not_tell_whether_an_id_is_stored(new_user: NewUser, tmp_path: Path) -> None:
    """Bob's MemCube renamed to one of alice's item ids, or to an unused one: both 201, alike."""
    bob, alice, cube_id = _bob_and_alice(new_user)
    theirs = _items(alice, alice.http.get("/mem_cubes").json()[0]["cube_id"])[0]["id"]
    archive = _export(bob, cube_id, tmp_path)
    answers = []
    for name, probe in (("taken", theirs), ("unused", "01UNUSEDUNUSEDUNUSEDUNUSED")):
        with open_cube(archive) as data:
            renamed = rehome(data, cube_id=cube_id, owner=bob.user_id,
                             item_ids={data.items[0].id: probe})  # fmt: skip
            write_cube(renamed, tmp_path / f"{name}.tar.gz")
        answer = _import(bob, tmp_path / f"{name}.tar.gz", cube_id=f"{bob.user_id}-{name}")
        assert answer.status_code == 201, answer.text
        (item,) = _items(bob, answer.json()["cube_id"])
        assert item["id"] != probe
        answers.append(
            {k: v for k, v in answer.json().items() if k not in ("cube_id", "created_at")}
        )
    assert answers[0] == answers[1]


def test_an_import_error_names_no_server_path(new_user: NewUser) -> None:
    bob = new_user("bob")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(tarfile.TarInfo("items.jsonl"), io.BytesIO(b""))
    files = {"file": ("cube.tar.gz", buffer.getvalue(), "application/gzip")}
    refused = bob.http.post("/mem_cubes/import", files=files)
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert "cube.json is missing" in message
    assert tempfile.gettempdir() not in message and "memstrata-" not in message


def _no_server_path(answer: httpx.Response) -> str:
    """The 400 ``memcube_error`` message of ``answer``, checked to name no server folder."""
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "memcube_error"
    for said in (error["message"], error.get("hint") or ""):
        assert tempfile.gettempdir() not in said and "memstrata-" not in said, said
    message: str = error["message"]
    return message


def test_an_upload_that_is_not_an_archive_names_no_server_path(new_user: NewUser) -> None:
    bob = new_user("bob")
    files = {"file": ("cube.tar.gz", b"not a tar at all", "application/gzip")}
    message = _no_server_path(bob.http.post("/mem_cubes/import", files=files))
    assert message.startswith("the uploaded archive is not a tar archive")


def test_a_failed_export_names_no_server_path(
    new_user: NewUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills up while the server writes the export into its temporary folder."""
    bob = new_user("bob")
    cube_id = bob.http.post("/mem_cubes", json={"name": "bob's"}).json()["cube_id"]

    def full(staging: Path, packed: Path, manifest: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(packed))

    monkeypatch.setattr("memstrata.memcube.files._pack", full)
    message = _no_server_path(bob.http.post(f"/mem_cubes/{cube_id}/export"))
    assert message == "cannot write a MemCube at a temporary file: No space left on device"
