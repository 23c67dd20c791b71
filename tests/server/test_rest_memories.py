"""Memories over HTTP: add (messages, text, documents), list, get, update, delete, history,
search, context, profile, tasks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account

    NewUser = Callable[..., Account]
    OwnerCube = tuple[Account, str]

HIT_FIELDS = {"id", "cube_id", "text", "score", "type", "tier", "event_time", "sources"}


def _code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_add_list_get_update_delete_and_history(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    http = owner.http
    listed = http.get(f"/memories/{cube_id}").json()
    assert [i["text"] for i in listed] == [
        "I moved to Porto last spring.",
        "My cat is called Miso.",
    ]
    assert [i["speaker"] for i in listed] == ["Ann", "Ann"]
    page = http.get(f"/memories/{cube_id}", params={"limit": 1, "offset": 1}).json()
    assert [i["id"] for i in page] == [listed[1]["id"]]
    item_id = listed[0]["id"]
    got = http.get(f"/memories/{cube_id}/{item_id}").json()
    assert got == listed[0] | {"access_count": got["access_count"]}
    updated = http.put(
        f"/memories/{cube_id}/{item_id}",
        json={"text": "I moved to Lisbon last spring.", "reason": "typo"},
    ).json()
    assert (updated["version"], updated["text"]) == (2, "I moved to Lisbon last spring.")
    hits = http.post("/search", json={"query": "Lisbon", "cube_ids": [cube_id]}).json()["hits"]
    assert hits[0]["id"] == item_id
    deleted = http.delete(f"/memories/{cube_id}/{item_id}", params={"reason": "wrong"}).json()
    assert deleted["status"] == "deleted"
    history = http.get(f"/memories/{cube_id}/{item_id}/history").json()
    assert [(v["version"], v["actor"], v["reason"]) for v in history] == [
        (1, owner.user_id, None),
        (2, owner.user_id, "typo"),
        (3, owner.user_id, "wrong"),
    ]
    assert [i["id"] for i in http.get(f"/memories/{cube_id}").json()] == [listed[1]["id"]]
    gone = http.get(f"/memories/{cube_id}", params={"status": "deleted"}).json()
    assert [i["id"] for i in gone] == [item_id]
    assert _code(http.put(f"/memories/{cube_id}/{item_id}", json={"text": "x"})) == (
        409,
        "conflict",
    )


def test_add_accepts_memos_field_names_and_dedupes_external_ids(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    one = owner.http.post(
        "/memories",
        json={"mem_cube_id": cube_id, "memory_content": "Ann likes green tea.", "session_id": "s1"},
    )
    assert len(one.json()["ids"]) == 1
    message = {"role": "assistant", "content": "Noted.", "id": "m-1", "timestamp": 1700000000}
    first = owner.http.post("/memories", json={"cube_id": cube_id, "messages": [message]})
    again = owner.http.post("/memories", json={"cube_id": cube_id, "messages": [message]})
    assert first.json() == again.json()
    stored = owner.http.get(f"/memories/{cube_id}/{first.json()['ids'][0]}").json()
    assert (stored["external_id"], stored["event_time"]) == ("m-1", "2023-11-14T22:13:20Z")
    clash = owner.http.post(
        "/memories",
        json={"cube_id": cube_id, "messages": [{**message, "content": "Something else."}]},
    )
    assert _code(clash) == (409, "conflict")


def test_bad_additions_are_422_and_store_nothing(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    before = owner.http.get(f"/memories/{cube_id}").json()
    for body in [
        {"cube_id": cube_id},
        {"cube_id": cube_id, "messages": "a", "memory_content": "b"},
        {"cube_id": cube_id, "messages": []},
        {"cube_id": cube_id, "messages": [{"content": "x", "colour": "red"}]},
        {"cube_id": cube_id, "messages": [{"role": "user"}]},
        {"cube_id": cube_id, "memory_content": "   "},
        {"cube_id": cube_id, "memory_content": "x", "session_id": "bad id!"},
        {"cube_id": cube_id, "memory_content": "x", "surprise": True},
        {"memory_content": "no cube"},
        [1, 2, 3],
    ]:
        assert _code(owner.http.post("/memories", json=body)) == (422, "invalid_input"), body
    assert _code(owner.http.post("/memories", content=b"text", headers={})) == (
        415,
        "unsupported_media_type",
    )
    unknown = owner.http.post("/memories", json={"cube_id": "no-such-cube", "memory_content": "x"})
    assert _code(unknown) == (404, "not_found")
    assert owner.http.get(f"/memories/{cube_id}").json() == before


def test_a_document_upload_is_chunked_and_searchable(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    text = "# Trip\n\nWe hiked to the Pico do Arieiro at dawn. Café com leite afterwards."
    upload = {"file": ("trip.md", text.encode("utf-8"), "text/markdown")}
    added = owner.http.post("/memories", files=upload, data={"cube_id": cube_id})
    assert added.status_code == 200, added.text
    ids = added.json()["ids"]
    assert len(ids) == 1
    again = owner.http.post("/memories", files=upload, data={"mem_cube_id": cube_id})
    assert again.json()["ids"] == ids
    hits = owner.http.post("/search", json={"query": "Pico do Arieiro"}).json()["hits"]
    assert hits[0]["id"] == ids[0]
    assert "Café com leite" in hits[0]["text"]
    assert (hits[0]["tier"], hits[0]["type"]) == ("long", "chunk")
    assert hits[0]["sources"][0]["uri"] == "document:trip.md"
    data = json.dumps({"note": "Ann's passport expires in May"}).encode()
    as_json = owner.http.post(
        "/memories", files={"file": ("a.json", data)}, data={"cube_id": cube_id, "session_id": "s"}
    )
    assert as_json.status_code == 200


def test_bad_uploads_are_refused(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    doc = {"file": ("notes.txt", b"some notes")}
    cases = [
        ({"file": ("tool.exe", b"MZ")}, {"cube_id": cube_id}, 422),
        ({"file": ("a.pdf", b"%PDF-1.4 truncated")}, {"cube_id": cube_id}, 422),
        ({"file": ("empty.txt", b"")}, {"cube_id": cube_id}, 422),
        (doc, {}, 422),
        (doc, {"cube_id": cube_id, "colour": "red"}, 422),
        (doc, {"cube_id": cube_id, "user_id": "admin"}, 422),
        ({"other": ("notes.txt", b"x")}, {"cube_id": cube_id}, 422),
        (doc, {"cube_id": "no-such-cube"}, 404),
    ]
    for files, data, status in cases:
        response = owner.http.post("/memories", files=files, data=data)
        assert response.status_code == status, (files, data, response.text)
        assert set(response.json()) == {"error"}
    two = owner.http.post(
        "/memories",
        files=[("file", ("a.txt", b"a")), ("file", ("b.txt", b"b"))],
        data={"cube_id": cube_id},
    )
    assert _code(two) == (400, "bad_request")
    bob = new_user("bob")
    assert _code(bob.http.post("/memories", files=doc, data={"cube_id": cube_id})) == (
        403,
        "permission_denied",
    )


def test_unknown_ids_are_404(owner_cube: OwnerCube, new_user: NewUser) -> None:
    owner, cube_id = owner_cube
    item_id = owner.http.get(f"/memories/{cube_id}").json()[0]["id"]
    other_cube = owner.http.post("/mem_cubes", json={"name": "other"}).json()["cube_id"]
    for response in [
        owner.http.get(f"/memories/{cube_id}/01NOSUCHITEM0000000000000"),
        owner.http.put(f"/memories/{cube_id}/01NOSUCHITEM0000000000000", json={"text": "x"}),
        owner.http.delete(f"/memories/{cube_id}/01NOSUCHITEM0000000000000"),
        owner.http.get(f"/memories/{cube_id}/01NOSUCHITEM0000000000000/history"),
        owner.http.get(f"/memories/{other_cube}/{item_id}"),
        owner.http.get("/memories/no-such-cube"),
        owner.http.get("/mem_cubes/no-such-cube"),
        owner.http.post("/search", json={"query": "x", "install_cube_ids": ["no-such-cube"]}),
        owner.http.get("/users/me/profile", params={"cube_id": "no-such-cube"}),
        owner.http.get("/users/me/preferences", params={"cube_id": "no-such-cube"}),
        owner.http.post("/tasks/wait", json={"cube_id": "no-such-cube"}),
    ]:
        assert _code(response) == (404, "not_found"), response.request.url


def test_search_returns_hits_in_the_documented_shape(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    found = owner.http.post(
        "/search", json={"query": "What is the cat's name?", "cube_ids": [cube_id], "top_k": 1}
    )
    hits = found.json()["hits"]
    assert len(hits) == 1
    assert set(hits[0]) >= HIT_FIELDS | {"session_id", "speaker", "ranks", "metadata", "status"}
    assert hits[0]["text"] == "My cat is called Miso."
    assert hits[0]["score"] > 0
    filtered = owner.http.post(
        "/search", json={"query": "cat", "filters": {"tier": "long", "type": "fact"}}
    )
    assert filtered.json() == {"hits": []}
    for body in [
        {"query": ""},
        {"query": "cat", "top_k": 0},
        {"query": "cat", "top_k": 1001},
        {"query": "cat", "filters": {"colour": "red"}},
        {"query": "cat", "cube_ids": "not-a-list"},
    ]:
        assert _code(owner.http.post("/search", json=body)) == (422, "invalid_input"), body


def test_context_packs_memories_into_a_budget(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    packed = owner.http.post(
        "/context",
        json={"query": "Where did Ann move?", "budget_tokens": 200, "cube_ids": [cube_id]},
    ).json()
    assert "Porto" in packed["text"]
    assert packed["budget"] == 200
    assert 0 < packed["tokens"] <= 200
    assert {i["id"] for i in packed["items"]} >= {h["id"] for h in packed["hits"]}
    assert set(packed["hits"][0]) >= HIT_FIELDS | {"session_id", "speaker", "ranks"}
    tiny = owner.http.post("/context", json={"query": "Porto", "budget_tokens": 1}).json()
    assert (tiny["text"], tiny["items"]) == ("", [])
    too_big = owner.http.post("/context", json={"query": "Porto", "budget_tokens": 10**7})
    assert _code(too_big) == (422, "invalid_input")


def test_profile_tasks_and_wait(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    assert owner.http.get("/users/me/profile").json() == []
    waited = owner.http.post("/tasks/wait", json={"cube_id": cube_id, "timeout_s": 30})
    assert waited.json() == {"done": True}
    tasks = owner.http.get("/tasks", params={"cube_id": cube_id}).json()
    assert tasks
    assert {t["cube_id"] for t in tasks} == {cube_id}
    assert {t["status"] for t in tasks} == {"done"}
    assert owner.http.post("/tasks/wait").json() == {"done": True}
    late = owner.http.post("/tasks/wait", json={"timeout_s": 61})
    assert _code(late) == (422, "invalid_input")
    assert owner.http.get("/tasks", params={"status": "failed"}).json() == []


def test_preferences_with_evidence_for_readers_only(new_user: NewUser) -> None:
    owner, other = new_user("owner"), new_user("other")
    hot = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}
    cube_id = owner.http.post("/mem_cubes", json={"name": "p", "settings": hot}).json()["cube_id"]
    said = [{"role": "user", "name": "Ann", "content": "I really love hiking."},
            {"role": "user", "name": "Bob", "content": "ok"}]  # fmt: skip
    turn = owner.http.post("/memories", json={"cube_id": cube_id, "messages": said}).json()
    assert owner.http.post("/tasks/wait", json={"cube_id": cube_id}).json() == {"done": True}
    (found,) = owner.http.get("/users/me/preferences", params={"cube_id": cube_id}).json()
    assert found == owner.http.get("/users/me/preferences").json()[0]
    assert (found["subject"], found["key"], found["polarity"], found["explicit"]) == (
        "Ann", "hiking", 1, True
    )  # fmt: skip
    assert found["evidence"] == turn["ids"][:1] and found["text"] == "Ann likes hiking"
    assert set(found) >= {"cube_id", "since", "item_id"}
    assert other.http.get("/users/me/preferences").json() == []
    denied = other.http.get("/users/me/preferences", params={"cube_id": cube_id})
    assert _code(denied) == (403, "permission_denied")
