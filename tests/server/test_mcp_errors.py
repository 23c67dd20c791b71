"""MCP tool errors as a client reads them: arguments refused by a tool's input schema come back
on one line, field by field, without pydantic's documentation URLs or the rejected values.

In-process (``mcp.Client`` on the server object): the rendering is the server's, not the
transport's; ``test_mcp.py`` drives the real ``memstrata mcp`` processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import TextContent

from memstrata import MemoryOS
from memstrata.limits import MAX_QUERY_CHARS, MAX_REASON
from memstrata.server.mcp import build_server, fixed_caller

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def memory(db_path: Path) -> Iterator[MemoryOS]:
    with MemoryOS.open(str(db_path), workers=0) as mos:
        yield mos


async def error_text(memory: MemoryOS, tool: str, **arguments: object) -> str:
    server = build_server(memory, fixed_caller(memory, "alice"))
    async with Client(server) as client:
        result = await client.call_tool(tool, dict(arguments))
    assert result.is_error
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


async def test_refused_arguments_are_one_line_without_pydantic_urls(memory: MemoryOS) -> None:
    secret = "a value the error need not echo " * 20
    text = await error_text(
        memory, "search_memories", query="bees", top_k=10**9, include=["deleted"], cube_ids=secret
    )
    assert "pydantic.dev" not in text and "http" not in text
    assert "\n" not in text and secret not in text
    assert text.startswith("Error executing tool search_memories: invalid arguments: ")
    assert "top_k: Input should be less than or equal to" in text
    assert "include.0: Input should be" in text
    assert "cube_ids: Input should be a valid list" in text


async def test_a_missing_argument_is_named(memory: MemoryOS) -> None:
    text = await error_text(memory, "add_memory")
    assert "pydantic.dev" not in text and "\n" not in text
    assert "invalid arguments:" in text and "Field required" in text


async def test_an_overlong_argument_is_refused_with_its_bound(memory: MemoryOS) -> None:
    text = await error_text(memory, "search_memories", query="q" * (MAX_QUERY_CHARS + 1))
    assert f"query: String should have at most {MAX_QUERY_CHARS} characters" in text
    text = await error_text(memory, "delete_memory", memory_id="m1", reason="r" * (MAX_REASON + 1))
    assert f"reason: String should have at most {MAX_REASON} characters" in text
    assert "r" * 100 not in text
