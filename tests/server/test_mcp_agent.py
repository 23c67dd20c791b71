"""Tool memory, skill memory and images over MCP (issue 30's surfaces), on both engines, driven by
the official ``mcp`` client against a ``memstrata mcp`` stdio subprocess (tests/server/test_mcp.py's
style): ``add_memories`` and ``add_memory`` take tool calls, content parts and ``tools`` as
``MemoryOS.add`` does, ``end_task`` is ``MemoryOS.end_task``, and ``get_image`` answers an MCP
image content block."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import ImageContent

from memstrata import MemoryOS
from tests.server.test_mcp import call, fail, schema_fail
from tests.test_tools_skills import PNG, WEATHER
from tests.test_tools_skills import call as tool_call
from tests.test_tools_skills import result as tool_result

pytestmark = [pytest.mark.anyio, pytest.mark.engines("sqlite", "postgres")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def session_on(database: str, artifacts: Path, log: Path) -> AsyncIterator[ClientSession]:
    """``memstrata mcp --transport stdio`` as alice in cube ``notes`` of ``database``, its
    artifacts (images) in ``artifacts``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    env["MEMSTRATA_ARTIFACTS_DIR"] = str(artifacts)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memstrata", "mcp", "--transport", "stdio", "--db", database,
              "--user", "alice", "--cube", "notes"],
        env=env,
    )  # fmt: skip
    with log.open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def _photo(alt: str) -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    return {"type": "image_url", "image_url": {"url": url}, "alt": alt}


async def test_agent_memory_tools(database: str, tmp_path: Path) -> None:
    """add_memories (tool calls, results, an image part, tools), add_memory with tool_steps and
    a session, end_task (a skill learnt, then found by search_memories include skill, then
    demoted), get_image (an image block with the bytes sent); errors on one line."""
    with MemoryOS.open(database, workers=0, artifacts_dir=str(tmp_path / "art")) as mos:
        mos.create_user("alice")
        mos.create_cube("notes", owner="alice", cube_id="notes")
    log = tmp_path / "server.log"
    async with session_on(database, tmp_path / "art", log) as session:
        messages = [
            {"role": "user", "content": [
                {"type": "text", "text": "What's the weather in Paris? Here is my view."},
                _photo("a rainy street in Paris"),
            ]},
            tool_call("c1", "get_weather", city="Paris"),
            tool_result("c1", '{"temp": 12, "sky": "rain"}', duration_ms=40),
        ]  # fmt: skip
        added = await call(
            session, "add_memories", messages=messages, session_id="s1", tools=[WEATHER]
        )
        items = [await call(session, "get_memory", memory_id=i) for i in added["ids"]]
        assert sorted(i["type"] for i in items) == ["image", "tool", "tool_call", "turn"]
        image = next(i for i in items if i["type"] == "image")
        shown = await session.call_tool("get_image", {"memory_id": image["id"]})
        assert not shown.is_error
        (block,) = shown.content
        assert isinstance(block, ImageContent) and block.mime_type == "image/png"
        assert base64.b64decode(block.data) == PNG
        turn = next(i for i in items if i["type"] == "turn")
        assert "no memory item" in await fail(session, "get_image", memory_id=turn["id"])

        steps = [
            tool_call("c2", "get_weather", city="Lisbon"),
            tool_result("c2", '{"temp": 21, "sky": "sun"}'),
        ]
        exchange = await call(
            session, "add_memory", user_input="And the weather in Lisbon?",
            agent_response="21 degrees and sunny.", tool_steps=steps, session_id="s2",
        )  # fmt: skip
        assert len(exchange["ids"]) == 3  # two turns and the call (its schema is stored)
        found = await call(
            session, "search_memories", query="weather API call for Lisbon", include=["tool"]
        )
        best = found["hits"][0]["item"]
        assert best["type"] == "tool_call" and best["metadata"]["arguments"] == {"city": "Lisbon"}

        learnt = await call(session, "end_task", session_id="s1")
        (skill,) = learnt["skills"]
        assert skill["type"] == "skill" and learnt["cube_id"] == "notes"
        asked = await call(
            session, "search_memories", query="is it raining in Rome today", include=["skill"]
        )
        assert asked["hits"][0]["item"]["id"] == skill["id"]
        demoted = await call(
            session, "end_task", session_id="s2", outcome="failure", skill_ids=[skill["id"]]
        )
        assert demoted["skills"][0]["version"] == 2
        assert "goal holds NUL" in await fail(session, "end_task", session_id="s1", goal="a\0b")
        rejected = await schema_fail(session, "end_task", session_id="s1", outcome="maybe")
        assert "'success' or 'failure'" in rejected
    assert "Traceback" not in log.read_text(encoding="utf-8")
