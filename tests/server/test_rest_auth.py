"""Who may call what: bearer keys (missing, wrong, revoked), admin-only routes, own keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account, Server

    NewUser = Callable[..., Account]


def _error(response: httpx.Response, status: int, code: str) -> str:
    """The error message of ``response``, once its status and one JSON shape are checked."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    return str(body["error"]["message"])


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer ms_not-a-key-that-exists"},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "ms_no-scheme"},
    ],
    ids=["missing", "unknown", "empty", "basic", "no-scheme"],
)
def test_a_request_without_a_live_key_is_401(server: Server, headers: dict[str, str]) -> None:
    http = server.client()
    for method, path in [("GET", "/users/me"), ("GET", "/mem_cubes"), ("POST", "/search")]:
        response = http.request(method, path, headers=headers, json={"query": "x"})
        _error(response, 401, "unauthenticated")
        assert response.headers["WWW-Authenticate"] == "Bearer"


def test_health_and_the_openapi_description_need_no_key(server: Server) -> None:
    http = server.client()
    assert http.get("/health").json()["status"] == "ok"
    spec = http.get("/openapi.json").json()
    assert "/memories" in spec["paths"]
    assert spec["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    docs = http.get("/docs")  # plain HTML, no script (tests/security/test_inspector.py)
    assert docs.status_code == 200 and "/memories" in docs.text


def test_the_key_says_who_the_caller_is(new_user: NewUser) -> None:
    ann = new_user("ann")
    me = ann.http.get("/users/me").json()
    assert me["user_id"] == ann.user_id
    assert me["role"] == "user"


def test_a_revoked_key_is_401_and_the_other_keys_still_work(new_user: NewUser) -> None:
    ann = new_user("ann")
    second = ann.http.post("/users/me/keys", json={"label": "laptop"})
    assert second.status_code == 201
    key_id, key = second.json()["key_id"], second.json()["key"]
    with httpx.Client(base_url=str(ann.http.base_url)) as other:
        other.headers["Authorization"] = f"Bearer {key}"
        assert other.get("/users/me").json()["user_id"] == ann.user_id
        revoked = ann.http.delete(f"/users/{ann.user_id}/keys/{key_id}")
        assert revoked.status_code == 204
        _error(other.get("/users/me"), 401, "unauthenticated")
    assert ann.http.get("/users/me").status_code == 200
    listed = {k["key_id"]: k for k in ann.http.get("/users/me/keys").json()}
    assert listed[key_id]["revoked_at"] is not None
    assert "key" not in listed[key_id]  # a key is shown once, at creation
    _error(ann.http.delete(f"/users/me/keys/{key_id}"), 404, "not_found")


def test_a_user_may_not_manage_another_users_keys(new_user: NewUser) -> None:
    ann, bob = new_user("ann"), new_user("bob")
    _error(ann.http.get(f"/users/{bob.user_id}/keys"), 403, "permission_denied")
    _error(ann.http.post(f"/users/{bob.user_id}/keys", json={}), 403, "permission_denied")
    bobs = bob.http.get("/users/me/keys").json()
    _error(
        ann.http.delete(f"/users/{bob.user_id}/keys/{bobs[0]['key_id']}"),
        403,
        "permission_denied",
    )


def test_an_admin_manages_anyones_keys(admin: httpx.Client, new_user: NewUser) -> None:
    bob = new_user("bob")
    made = admin.post(f"/users/{bob.user_id}/keys")
    assert made.status_code == 201
    assert made.json()["user_id"] == bob.user_id
    assert len(admin.get(f"/users/{bob.user_id}/keys").json()) == 2
    assert admin.delete(f"/users/{bob.user_id}/keys/{made.json()['key_id']}").status_code == 204
    _error(admin.get("/users/nobody-at-all/keys"), 404, "not_found")


def test_only_an_admin_lists_and_creates_users(admin: httpx.Client, new_user: NewUser) -> None:
    ann = new_user("ann")
    _error(ann.http.get("/users"), 403, "permission_denied")
    _error(ann.http.post("/users", json={"user_id": "mallory"}), 403, "permission_denied")
    _error(
        ann.http.post("/users", json={"user_id": "mallory", "role": "admin"}),
        403,
        "permission_denied",
    )
    assert ann.user_id in {u["user_id"] for u in admin.get("/users").json()}
    made = admin.post("/users", json={"user_id": "carol-x", "name": "Carol", "role": "admin"})
    assert made.status_code == 201
    assert made.json() | {"created_at": None} == {
        "user_id": "carol-x",
        "name": "Carol",
        "role": "admin",
        "created_at": None,
    }
    _error(admin.post("/users", json={"user_id": "carol-x"}), 409, "conflict")
    _error(admin.post("/users", json={"user_id": "bad id!"}), 422, "invalid_input")
    _error(admin.post("/users", json={"user_id": "x", "role": "root"}), 422, "invalid_input")


def test_only_an_admin_configures(admin: httpx.Client, new_user: NewUser) -> None:
    ann = new_user("ann")
    _error(ann.http.post("/configure", json={"rrf_k": 30}), 403, "permission_denied")
    before = admin.post("/configure", json={}).json()
    changed = admin.post("/configure", json={"rrf_k": before["rrf_k"] + 1})
    assert changed.json()["rrf_k"] == before["rrf_k"] + 1
    message = _error(admin.post("/configure", json={"db": "/tmp/x.db"}), 422, "invalid_input")
    assert "db" in message
    admin.post("/configure", json={"rrf_k": before["rrf_k"]})


def test_a_user_id_in_a_body_must_be_the_callers(owner_cube: tuple[Account, str]) -> None:
    owner, cube_id = owner_cube
    mine = owner.http.post("/search", json={"query": "Porto", "user_id": owner.user_id})
    assert mine.status_code == 200
    for path, body in [
        ("/search", {"query": "Porto"}),
        ("/context", {"query": "Porto"}),
        ("/memories", {"cube_id": cube_id, "memory_content": "x"}),
    ]:
        response = owner.http.post(path, json={**body, "user_id": "admin"})
        assert "not the caller" in _error(response, 422, "invalid_input")
