"""Issue 25 over HTTP and the Python client: ``POST /feedback``, ``expires_at`` in the add and
update bodies, ``POST /expire`` (on both engines, through the session's real servers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from memstrata.client import Client
from memstrata.errors import PermissionDenied, ValidationError

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account, Server

    NewUser = Callable[..., Account]
    OwnerCube = tuple[Account, str]

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2999-01-01T00:00:00Z"


def _add(owner: Account, cube_id: str, content: str, **body: object) -> str:
    added = owner.http.post(
        "/memories", json={"cube_id": cube_id, "messages": [{"content": content}], **body}
    )
    assert added.status_code == 200, added.text
    item_id: str = added.json()["ids"][0]
    return item_id


def test_feedback_confirms_corrects_and_refuses(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    bike = _add(owner, cube_id, "My bike is a red Cinelli.")
    confirmed = owner.http.post(
        "/feedback", json={"cube_id": cube_id, "text": "yes, that's right", "item_ids": [bike]}
    )
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json() == {
        "kind": "confirm", "cube_id": cube_id, "affected": [bike], "new_item_id": None,
    }  # fmt: skip
    fixed = owner.http.post(
        "/feedback",
        json={"mem_cube_id": cube_id, "text": "No, my bike is a blue Colnago", "item_ids": [bike]},
    )
    assert fixed.status_code == 200, fixed.text
    new_id = fixed.json()["new_item_id"]
    assert owner.http.get(f"/memories/{cube_id}/{bike}").json()["valid_to"] is not None
    assert "Colnago" in owner.http.get(f"/memories/{cube_id}/{new_id}").json()["text"]
    for bad in ({"text": "hmm"}, {"text": "that's wrong"}, {"text": "yes", "item_ids": []}):
        refused = owner.http.post("/feedback", json={"cube_id": cube_id, **bad})
        assert refused.status_code == 422, refused.text
    reader = new_user("reader")
    owner.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": reader.user_id})
    denied = reader.http.post(
        "/feedback", json={"cube_id": cube_id, "text": "that's wrong", "item_ids": [bike]}
    )
    assert denied.status_code == 403, denied.text


def test_expiry_in_add_and_update_bodies_and_expire_now(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    gone = _add(owner, cube_id, "The door code is 2468.", expires_at=PAST)
    kept = _add(owner, cube_id, "The gate code is 1357.", expires_at=FUTURE)
    assert owner.http.get(f"/memories/{cube_id}/{gone}").status_code == 404
    assert owner.http.get(f"/memories/{cube_id}/{kept}").json()["expires_at"].startswith("2999")
    hits = owner.http.post("/search", json={"query": "code", "cube_ids": [cube_id]}).json()
    assert [h["id"] for h in hits["hits"] if "code" in h["text"]] == [kept]
    never = owner.http.put(f"/memories/{cube_id}/{kept}", json={"expires_at": "never"})
    assert never.status_code == 200 and never.json()["expires_at"] is None
    bad = owner.http.put(f"/memories/{cube_id}/{kept}", json={"expires_at": "later"})
    assert bad.status_code == 422
    erased = owner.http.post("/expire", json={"cube_id": cube_id})
    assert erased.status_code == 200 and erased.json() == {"erased": 1}
    assert owner.http.get(f"/memories/{cube_id}/{gone}").json()["status"] == "deleted"


@pytest.fixture
def client(server: Server, owner_cube: OwnerCube) -> Client:
    owner, _ = owner_cube
    with Client(server.url, owner.key) as made:
        yield made  # type: ignore[misc]


def test_the_client_gives_feedback_and_expires(client: Client, owner_cube: OwnerCube) -> None:
    _, cube_id = owner_cube
    (note,) = client.add("Lunch is at noon.", cube_id=cube_id, expires_at=FUTURE)
    assert client.get(note, cube_id=cube_id).expires_at is not None
    result = client.feedback(
        "wrong time", cube_id=cube_id, item_ids=[note], corrected="Lunch is at one."
    )
    assert (result.kind, result.affected) == ("correct", [note])
    assert client.get(result.new_item_id or "", cube_id=cube_id).text == "Lunch is at one."
    client.update(note, cube_id=cube_id, expires_at=PAST)
    assert client.expire(cube_id=cube_id) == 1
    with pytest.raises(ValidationError):
        client.feedback("hmm", cube_id=cube_id)
    with pytest.raises(PermissionDenied):
        client.expire()  # every cube: an administrator's
