"""Cubes and sharing: every cube access goes through the grants, with and without one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account

    NewUser = Callable[..., Account]
    OwnerCube = tuple[Account, str]


def _code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_create_list_get_and_delete_a_cube(new_user: NewUser) -> None:
    ann = new_user("ann")
    made = ann.http.post("/mem_cubes", json={"name": "work", "cube_id": f"{ann.user_id}-work"})
    assert made.status_code == 201
    cube = made.json()
    assert (cube["cube_id"], cube["name"], cube["owner"]) == (
        f"{ann.user_id}-work",
        "work",
        ann.user_id,
    )
    generated = ann.http.post("/mem_cubes", json={"name": "other"}).json()["cube_id"]
    listed = [c["cube_id"] for c in ann.http.get("/mem_cubes").json()]
    assert listed == [cube["cube_id"], generated]
    assert ann.http.get(f"/mem_cubes/{generated}").json()["name"] == "other"
    added = ann.http.post("/memories", json={"cube_id": generated, "memory_content": "a note"})
    assert added.status_code == 200
    gone = ann.http.delete(f"/mem_cubes/{generated}")
    assert gone.json() == {"cube_id": generated, "deleted_items": 1}
    assert _code(ann.http.get(f"/mem_cubes/{generated}")) == (404, "not_found")
    assert _code(ann.http.delete(f"/mem_cubes/{generated}")) == (404, "not_found")
    again = ann.http.post("/mem_cubes", json={"name": "work", "cube_id": cube["cube_id"]})
    assert _code(again) == (409, "conflict")
    bad = ann.http.post("/mem_cubes", json={"name": "x", "settings": {"nope": 1}})
    assert _code(bad) == (422, "invalid_input")


def test_without_a_grant_another_users_cube_is_closed(
    owner_cube: OwnerCube, new_user: NewUser
) -> None:
    owner, cube_id = owner_cube
    item_id = owner.http.get(f"/memories/{cube_id}").json()[0]["id"]
    bob = new_user("bob")
    denied = [
        bob.http.get(f"/mem_cubes/{cube_id}"),
        bob.http.get(f"/memories/{cube_id}"),
        bob.http.post("/memories", json={"cube_id": cube_id, "memory_content": "mine now"}),
        bob.http.post("/search", json={"query": "Porto", "cube_ids": [cube_id]}),
        bob.http.post("/context", json={"query": "Porto", "cube_ids": [cube_id]}),
        bob.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": bob.user_id}),
        bob.http.delete(f"/mem_cubes/{cube_id}"),
        bob.http.get("/tasks", params={"cube_id": cube_id}),
    ]
    assert [_code(r) for r in denied] == [(403, "permission_denied")] * len(denied)
    # An item of a cube the caller cannot read is "not found": its existence does not leak.
    hidden = [
        bob.http.get(f"/memories/{cube_id}/{item_id}"),
        bob.http.put(f"/memories/{cube_id}/{item_id}", json={"text": "changed"}),
        bob.http.delete(f"/memories/{cube_id}/{item_id}"),
        bob.http.get(f"/memories/{cube_id}/{item_id}/history"),
    ]
    assert [_code(r) for r in hidden] == [(404, "not_found")] * len(hidden)
    assert bob.http.post("/search", json={"query": "Porto"}).json() == {"hits": []}
    assert bob.http.get("/mem_cubes").json() == []
    unchanged = owner.http.get(f"/memories/{cube_id}/{item_id}").json()
    assert (unchanged["version"], unchanged["status"]) == (1, "generated")


def test_a_read_grant_lets_a_user_read_but_not_write(
    owner_cube: OwnerCube, new_user: NewUser
) -> None:
    owner, cube_id = owner_cube
    bob = new_user("bob")
    shared = owner.http.post(f"/mem_cubes/{cube_id}/share", json={"target_user_id": bob.user_id})
    assert shared.status_code == 200
    assert shared.json()["permission"] == "read"
    assert cube_id in [c["cube_id"] for c in bob.http.get("/mem_cubes").json()]
    hits = bob.http.post("/search", json={"query": "moved to Porto"}).json()["hits"]
    assert "Porto" in hits[0]["text"]
    item_id = hits[0]["id"]
    assert bob.http.get(f"/memories/{cube_id}/{item_id}").status_code == 200
    denied = [
        bob.http.post("/memories", json={"cube_id": cube_id, "memory_content": "x"}),
        bob.http.put(f"/memories/{cube_id}/{item_id}", json={"text": "changed"}),
        bob.http.delete(f"/memories/{cube_id}/{item_id}"),
        bob.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": bob.user_id}),
        bob.http.delete(f"/mem_cubes/{cube_id}"),
    ]
    assert [_code(r) for r in denied] == [(403, "permission_denied")] * len(denied)


def test_write_and_admin_grants(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    bob, carol = new_user("bob"), new_user("carol")
    owner.http.post(
        f"/mem_cubes/{cube_id}/share", json={"user_id": bob.user_id, "permission": "write"}
    )
    added = bob.http.post("/memories", json={"cube_id": cube_id, "memory_content": "from Bob"})
    assert added.status_code == 200
    share = bob.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": carol.user_id})
    assert _code(share) == (403, "permission_denied")
    owner.http.post(
        f"/mem_cubes/{cube_id}/share", json={"user_id": bob.user_id, "permission": "admin"}
    )
    share = bob.http.post(f"/mem_cubes/{cube_id}/share", json={"user_id": carol.user_id})
    assert share.status_code == 200
    assert carol.http.get(f"/mem_cubes/{cube_id}").status_code == 200
    assert bob.http.delete(f"/mem_cubes/{cube_id}").json()["deleted_items"] == 3
    assert _code(owner.http.get(f"/mem_cubes/{cube_id}")) == (404, "not_found")


def test_sharing_errors(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    share = f"/mem_cubes/{cube_id}/share"
    assert _code(owner.http.post(share, json={"user_id": "no-such-user"})) == (404, "not_found")
    assert _code(owner.http.post("/mem_cubes/no-such-cube/share", json={"user_id": "admin"})) == (
        404,
        "not_found",
    )
    bad = owner.http.post(share, json={"user_id": "admin", "permission": "owner"})
    assert _code(bad) == (422, "invalid_input")
    both = owner.http.post(share, json={"user_id": "admin", "target_user_id": "admin"})
    assert _code(both) == (422, "invalid_input")
