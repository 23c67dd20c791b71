"""The MemOS product API (issue 30) on both engines: MemOS's own example requests accepted and
answered in its envelope and buckets, tool and skill memory through it, and a second user's key
unable to read or write the first user's memories with a body ``user_id``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from tests.server.conftest import Account


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == 200 and isinstance(body["message"], str)
    return body


def _memories(bucket: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for cube in bucket for m in cube["memories"]]


def test_memos_example_requests_are_answered(new_user: Callable[..., Account]) -> None:
    """The requests of MemOS's docs (add with async_mode and unknown fields, search with the
    bucket switches, get_memory) are accepted and answered in MemOS's shape."""
    ann = new_user("ann")
    cube = ann.http.post("/mem_cubes", json={"name": "memos"}).json()["cube_id"]
    added = _ok(ann.http.post("/product/add", json={
        "user_id": ann.user_id, "mem_cube_id": cube, "async_mode": "async",
        "messages": [
            {"role": "user", "content": "I love strawberries", "chat_time": "2025-09-18 08:23:44"},
            {"role": "assistant", "content": "Noted: strawberries.", "message_id": "m-2"},
        ],
        "custom_tags": ["fruit"], "info": {"source": "plugin"},
    }))  # fmt: skip
    assert len(added["data"]) == 2 and added["data"][0]["cube_id"] == cube
    found = _ok(ann.http.post("/product/search", json={
        "query": "what fruit do I like", "user_id": ann.user_id, "readable_cube_ids": [cube],
        "mode": "fast", "top_k": 5, "relativity": 0.45, "dedup": "mmr",
        "include_preference": True, "pref_top_k": 6, "search_tool_memory": True,
        "tool_mem_top_k": 6, "include_skill_memory": True, "skill_mem_top_k": 3,
        "internet_search": False, "filter": {},
    }))  # fmt: skip
    data = found["data"]
    assert set(data) == {"text_mem", "act_mem", "para_mem", "pref_mem", "tool_mem", "skill_mem"}
    text = _memories(data["text_mem"])
    assert "strawberries" in text[0]["memory"]
    assert text[0]["metadata"]["memory_type"] == "WorkingMemory"
    assert "relativity" in text[0]["metadata"]
    listed = _ok(ann.http.post("/product/get_memory", json={"mem_cube_id": cube}))
    assert len(_memories(listed["data"]["text_mem"])) == 2
    assert _memories(listed["data"]["tool_mem"]) == []
    bad = ann.http.post("/product/search", json={"query": "x", "tool_mem_top_k": -1})
    assert bad.status_code == 422
    assert ann.http.post("/product/add", json={"mem_cube_id": cube}).status_code == 422


def test_tools_and_skills_through_the_product_api(new_user: Callable[..., Account]) -> None:
    """Tool calls added through /product/add are in the tool bucket; feedback confirming a
    session's task makes a skill that the skill bucket returns."""
    ann = new_user("ann")
    cube = ann.http.post("/mem_cubes", json={"name": "agent"}).json()["cube_id"]
    arguments = json.dumps({"city": "Paris"})
    messages = [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 18}'},
        {"role": "assistant", "content": "It is 18 degrees in Paris."},
    ]  # fmt: skip
    body = {"writable_cube_ids": [cube], "session_id": "task-1", "messages": messages}
    _ok(ann.http.post("/product/add", json=body))
    done = _ok(ann.http.post("/product/feedback", json={
        "writable_cube_ids": [cube], "session_id": "task-1",
        "feedback_content": "That worked, thanks", "task_outcome": "success",
    }))  # fmt: skip
    assert done["data"]["skills"][0]["metadata"]["memory_type"] == "SkillMemory"
    found = _ok(ann.http.post("/product/search", json={
        "query": "check the weather forecast for Rome", "readable_cube_ids": [cube],
    }))["data"]  # fmt: skip
    tools = _memories(found["tool_mem"])
    assert tools and tools[0]["metadata"]["type"] in ("tool_call", "tool")
    assert any(m["metadata"]["type"] == "tool_call" for m in tools)
    assert _memories(found["skill_mem"])[0]["metadata"]["type"] == "skill"
    assert all(
        m["metadata"]["type"] not in ("tool", "tool_call") for m in _memories(found["text_mem"])
    )


def test_another_users_key_cannot_reach_through_user_id(
    new_user: Callable[..., Account], admin: httpx.Client
) -> None:
    """A body user_id naming someone else is refused (403) to a user's key; the cube is
    refused too; an admin may act for a user, with that user's grants."""
    ann, eve = new_user("ann"), new_user("eve")
    cube = ann.http.post("/mem_cubes", json={"name": "private"}).json()["cube_id"]
    _ok(
        ann.http.post(
            "/product/add", json={"mem_cube_id": cube, "memory_content": "My PIN is 4711"}
        )
    )
    attempts = [
        ("/product/search", {"query": "PIN", "user_id": ann.user_id, "mem_cube_id": cube}),
        ("/product/add", {"user_id": ann.user_id, "mem_cube_id": cube, "memory_content": "x"}),
        ("/product/get_memory", {"user_id": ann.user_id, "mem_cube_id": cube}),
        ("/product/feedback", {"user_id": ann.user_id, "mem_cube_id": cube,
                               "feedback_content": "forget my PIN"}),
    ]  # fmt: skip
    for path, body in attempts:
        assert eve.http.post(path, json=body).status_code == 403, path
        own = {k: v for k, v in body.items() if k != "user_id"}
        assert eve.http.post(path, json=own).status_code == 403, path  # her key, his cube
    found = eve.http.post("/product/search", json={"query": "PIN"})
    assert "4711" not in found.text
    as_ann = admin.post("/product/search", json={"query": "PIN", "user_id": ann.user_id})
    assert "4711" in as_ann.text
