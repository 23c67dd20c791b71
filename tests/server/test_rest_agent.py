"""Tool memory, skill memory and images over REST and the Python clients (issue 30's surfaces),
on both engines: ``POST /memories`` takes what ``MemoryOS.add`` takes (tool calls, tool results,
content parts, ``tools``), ``POST /sessions/{session_id}/end`` is ``end_task``, and
``GET /memories/{cube_id}/{memory_id}/image`` serves ``get_image``'s bytes with headers that
never let them run on the inspector's origin.

The server is one of this module's (not the shared one of conftest): it keeps artifacts in a
folder of its own, which images need on PostgreSQL, and takes bodies of the default size.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from memstrata import MemoryOS
from memstrata.client import AsyncClient, Client
from memstrata.errors import NotFoundError, ValidationError
from memstrata.server.rest import bootstrap, create_app
from tests.services import fresh_database
from tests.test_tools_skills import PNG, WEATHER, call, result

CSP = "default-src 'none'; frame-ancestors 'none'; sandbox"


class Agent:
    """The module's server: its URL, an admin client, and users made through the API."""

    def __init__(self, url: str, admin_key: str) -> None:
        self.url = url
        self._admin = httpx.Client(base_url=url, headers=_bearer(admin_key), timeout=60)
        self._count = 0
        self._open: list[httpx.Client] = [self._admin]

    def user(self, prefix: str) -> tuple[str, str, httpx.Client, str]:
        """A new user with a key and a cube of their own: (user id, key, client, cube id)."""
        self._count += 1
        user_id = f"{prefix}-{self._count}"
        assert self._admin.post("/users", json={"user_id": user_id}).status_code == 201
        key = self._admin.post(f"/users/{user_id}/keys", json={}).json()["key"]
        http = httpx.Client(base_url=self.url, headers=_bearer(key), timeout=60)
        self._open.append(http)
        cube = http.post("/mem_cubes", json={"name": "agent"}).json()["cube_id"]
        return user_id, key, http, cube

    def close(self) -> None:
        for client in self._open:
            client.close()


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def agent(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    start_server: Callable[[FastAPI], AbstractContextManager[str]],
) -> Iterator[Agent]:
    folder = tmp_path_factory.mktemp("agent")
    with ExitStack() as stack:
        db = str(folder / "agent.db")
        if request.param == "postgres":
            db = stack.enter_context(fresh_database())
        memory = stack.enter_context(
            MemoryOS.open(db, workers=1, artifacts_dir=str(folder / "artifacts"))
        )
        key = bootstrap(memory)
        assert key is not None
        running = Agent(stack.enter_context(start_server(create_app(memory))), key)
        stack.callback(running.close)
        yield running


def _data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def _trajectory(image: bytes = PNG) -> list[dict[str, Any]]:
    """A task: the user asks with a photo, the agent calls a tool that works and one that fails."""
    return [
        {"role": "user", "content": [
            {"type": "text", "text": "What's the weather where this photo was taken, in Paris?"},
            {"type": "image_url", "image_url": {"url": _data_url(image)},
             "alt": "the Eiffel tower at dusk"},
        ]},
        call("c1", "get_weather", city="Paris"),
        result("c1", '{"temp": 18, "sky": "clear"}', duration_ms=95),
        call("c2", "send_postcard", to="ann@example.com"),
        result("c2", "Error: the postcard service is down"),
        {"role": "assistant", "content": "It is 18 degrees and clear in Paris."},
    ]  # fmt: skip


def _items(http: httpx.Client, cube: str, ids: list[str]) -> list[dict[str, Any]]:
    return [http.get(f"/memories/{cube}/{i}").json() for i in ids]


def test_post_memories_takes_tool_calls_parts_and_tools(agent: Agent) -> None:
    """The same message shapes as MemoryOS.add (tool_calls, tool results with tool_call_id,
    content parts) and ``tools``: stored as schemas, calls, an image and turns; a plain search
    leaves the calls out, ``include: ["tool"]`` finds them.  (``tools`` was a 422 before.)"""
    _, _, http, cube = agent.user("ann")
    body = {"cube_id": cube, "session_id": "trip", "messages": _trajectory(), "tools": [WEATHER]}
    added = http.post("/memories", json=body)
    assert added.status_code == 200, added.text
    items = _items(http, cube, added.json()["ids"])
    types = sorted(i["type"] for i in items)
    assert types == ["image", "tool", "tool", "tool_call", "tool_call", "turn", "turn"]
    weather = next(i for i in items if i["type"] == "tool_call" and i["key"] == "get_weather")
    assert weather["metadata"]["arguments"] == {"city": "Paris"}
    assert weather["metadata"]["status"] == "success" and weather["metadata"]["duration_ms"] == 95
    schema = next(i for i in items if i["type"] == "tool" and i["key"] == "get_weather")
    assert "Current weather for a city" in schema["text"]  # the definition sent, not observed
    postcard = next(i for i in items if i["type"] == "tool_call" and i["key"] == "send_postcard")
    assert postcard["metadata"]["status"] == "error"
    image = next(i for i in items if i["type"] == "image")
    assert image["text"] == "the Eiffel tower at dusk"
    query = {"query": "how did I call the weather API for Paris", "cube_ids": [cube]}
    plain = http.post("/search", json=query).json()["hits"]
    assert all(h["type"] not in ("tool", "tool_call") for h in plain)
    tool_hits = http.post("/search", json={**query, "include": ["tool"]}).json()["hits"]
    assert tool_hits[0]["id"] == weather["id"]
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    bad = http.post("/memories", json={"cube_id": cube, "messages": [
        {"role": "user", "content": [audio]}]})  # fmt: skip
    assert bad.status_code == 422 and "error" in bad.json()
    too_many = {"cube_id": cube, "messages": "x", "tools": [WEATHER] * 129}
    assert http.post("/memories", json=too_many).status_code == 422


def test_end_task_route_learns_and_demotes_a_skill(agent: Agent) -> None:
    """POST /sessions/{session_id}/end is end_task: success distils a skill that
    ``include: ["skill"]`` finds for a new task; failure demotes it; bad input is a 422
    (a NUL in the goal was a 500 on PostgreSQL, which refused the text), never half-written;
    another user's key cannot end a task in this cube."""
    _, _, http, cube = agent.user("ann")
    assert http.post("/memories", json={"cube_id": cube, "session_id": "t1",
                                        "messages": _trajectory()}).status_code == 200  # fmt: skip
    learnt = http.post("/sessions/t1/end", json={"cube_id": cube, "outcome": "success"})
    assert learnt.status_code == 200, learnt.text
    (skill,) = learnt.json()["skills"]
    assert skill["type"] == "skill" and "get_weather" in skill["text"]
    ask = {"query": "check the weather forecast for Rome", "cube_ids": [cube], "include": ["skill"]}
    assert http.post("/search", json=ask).json()["hits"][0]["id"] == skill["id"]
    for body, status in (
        ({"cube_id": cube, "outcome": "maybe"}, 422),
        ({"cube_id": cube, "goal": "book\x00 a flight"}, 422),
        ({"cube_id": cube, "goal": "x" * 4001}, 422),
        ({"cube_id": cube, "skill_ids": "one"}, 422),
        ({"cube_id": cube, "colour": "blue"}, 422),
    ):
        refused = http.post("/sessions/t1/end", json=body)
        assert refused.status_code == status, (body, refused.text)
        assert "error" in refused.json()
    assert http.post("/sessions/bad id!/end", json={"cube_id": cube}).status_code == 422
    history = http.get(f"/memories/{cube}/{skill['id']}/history").json()
    assert len(history) == 1  # the refusals wrote nothing
    _, _, eve, _ = agent.user("eve")
    assert eve.post("/sessions/t1/end", json={"cube_id": cube}).status_code in (403, 404)
    failed = http.post("/sessions/t1/end", json={
        "cube_id": cube, "outcome": "failure", "skill_ids": [skill["id"]]})  # fmt: skip
    assert failed.status_code == 200, failed.text
    (demoted,) = failed.json()["skills"]
    assert demoted["id"] == skill["id"] and demoted["version"] == 2
    assert demoted["confidence"] < skill["confidence"]


def test_image_route_serves_bytes_that_cannot_run_script(agent: Agent) -> None:
    """GET …/image: the bytes, their image type, inline, nosniff and a sandboxing CSP; when a
    writer changes the item's metadata to claim text/html, the same bytes are an opaque
    download, never HTML on the inspector's origin; an address image, another item, another
    user: 404."""
    _, _, http, cube = agent.user("ann")
    address = {"type": "input_image", "image_url": "https://example.com/cat.png", "alt": "a cat"}
    messages = [*_trajectory(), {"role": "user", "content": [address]}]
    ids = http.post("/memories", json={"cube_id": cube, "messages": messages}).json()["ids"]
    items = _items(http, cube, ids)
    image, by_address = (i for i in items if i["type"] == "image")
    served = http.get(f"/memories/{cube}/{image['id']}/image")
    assert served.status_code == 200 and served.content == PNG
    assert served.headers["content-type"] == "image/png"
    assert served.headers["content-disposition"] == "inline"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == CSP
    forged = {**image["metadata"], "image": {**image["metadata"]["image"],
                                             "media_type": "text/html"}}  # fmt: skip
    assert http.put(f"/memories/{cube}/{image['id']}", json={"metadata": forged}).is_success
    opaque = http.get(f"/memories/{cube}/{image['id']}/image")
    assert opaque.status_code == 200 and opaque.content == PNG
    assert opaque.headers["content-type"] == "application/octet-stream"
    assert opaque.headers["content-disposition"].startswith("attachment")
    assert opaque.headers["content-security-policy"] == CSP
    turn = next(i for i in items if i["type"] == "turn")
    for item_id in (by_address["id"], turn["id"], "01NOSUCHITEM"):
        missing = http.get(f"/memories/{cube}/{item_id}/image")
        assert missing.status_code == 404 and "error" in missing.json()
    _, _, eve, _ = agent.user("eve")
    assert eve.get(f"/memories/{cube}/{image['id']}/image").status_code in (403, 404)


def test_client_and_async_client_take_tools_end_task_and_get_image(agent: Agent) -> None:
    """Client and AsyncClient: add(..., tools=) stores the schemas and calls, end_task returns
    the skill as a MemoryItem, get_image the media type and bytes; the same errors as in
    process."""
    _, key, _, cube = agent.user("ann")
    with Client(agent.url, key) as client:
        ids = client.add(_trajectory(), cube_id=cube, session_id="c1", tools=[WEATHER])
        kinds = sorted(client.get(i, cube_id=cube).type for i in ids)
        assert kinds.count("tool_call") == 2 and kinds.count("tool") == 2
        image = next(i for i in ids if client.get(i, cube_id=cube).type == "image")
        assert client.get_image(image, cube_id=cube) == ("image/png", PNG)
        (skill,) = client.end_task(cube_id=cube, session_id="c1", goal="weather in <city>")
        assert skill.type == "skill" and skill.cube_id == cube
        hits = client.search("what is the weather like in Lyon", include=["skill"])
        assert hits[0].item.id == skill.id
        with pytest.raises(NotFoundError):
            client.get_image(ids[0] if ids[0] != image else ids[1], cube_id=cube)
        with pytest.raises(ValidationError):
            client.end_task(cube_id=cube, session_id="c1", outcome="maybe")

    async def scenario() -> tuple[tuple[str, bytes], list[str]]:
        async with AsyncClient(agent.url, key) as aclient:
            more = await aclient.add(_trajectory(), cube_id=cube, session_id="c2")
            skills = await aclient.end_task(cube_id=cube, session_id="c2", goal="weather in <city>")
            return await aclient.get_image(image, cube_id=cube), [s.id for s in skills] + more

    got, written = asyncio.run(scenario())
    assert got == ("image/png", PNG) and written[0] == skill.id  # the same goal: version 2


def test_an_image_too_large_for_the_core_is_a_422_and_nothing_is_written(agent: Agent) -> None:
    """An image over MAX_IMAGE_BYTES (within the body limit) is refused whole: no item, no
    file."""
    from memstrata.limits import MAX_IMAGE_BYTES

    _, _, http, cube = agent.user("ann")
    big = PNG + b"\0" * (MAX_IMAGE_BYTES + 1 - len(PNG))
    part = {"type": "image_url", "image_url": {"url": _data_url(big)}}
    body = {"cube_id": cube, "messages": [{"role": "user", "content": [part]}]}
    refused = http.post("/memories", json=body)
    assert refused.status_code == 422, refused.text[:200]
    assert http.get(f"/memories/{cube}").json() == []
    assert http.get(f"/mem_cubes/{cube}/artifacts").json() == []
