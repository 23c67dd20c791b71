"""issue 26, "every hit explains itself": each surface that searches shows a hit's parts when
asked (REST ``/search`` with ``explain``, ``Client.search(explain=True)`` and its async form,
the MCP tool ``search_memories(explain=true)``) and leaves them out otherwise.

Real parts: the session's REST server on both engines (``conftest.server``), the e5 embedder,
the in-process MCP server.  The contract checked is the general one, true of any query: every
hit has parts, their values sum to its score, its channel parts name the channels of its
``ranks`` with those ranks, and an answer with parts has the same hits in the same order as one
without.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from mcp import Client as MCPClient

from memstrata import MemoryOS
from memstrata.client import AsyncClient, Client
from memstrata.model import Hit, Part
from memstrata.server.mcp import build_server, fixed_caller
from memstrata.wire import record_from_wire

if TYPE_CHECKING:
    from tests.server.conftest import Account, Server

    NewUser = Callable[..., Account]

#: A small conversation: the newcomer's case of issue 26 (a pet turn, a move, a neighbour).
TURNS = [
    {"role": "user", "name": "alice", "content": "I adopted a beagle named Biscuit in March."},
    {"role": "assistant", "name": "bot", "content": "Biscuit is a lovely name."},
    {"role": "user", "name": "alice", "content": "I moved to Lisbon in 2023."},
    {"role": "assistant", "name": "bot", "content": "How do you like Lisbon so far?"},
    {"role": "user", "name": "alice", "content": "Lisbon is sunny; I walk Biscuit by the river."},
]
QUERY = "where does alice live"
PART_FIELDS = [f.name for f in fields(Part)]


def assert_explained(score: float, ranks: dict[str, int], parts: Sequence[Part]) -> None:
    """The contract of a hit's parts: some, summing to the score, the channels' as ranked."""
    assert parts, "a hit without parts"
    assert sum(p.value for p in parts) == pytest.approx(score, abs=1e-9)
    channels = {p.name: p.rank for p in parts if p.kind == "channel"}
    assert channels == ranks
    assert all(p.rank is None for p in parts if p.kind == "adjustment")


def parts_of(wire_hit: dict[str, Any]) -> list[Part]:
    """A wire hit's parts, each an object with exactly ``Part``'s fields."""
    assert all(list(p) == PART_FIELDS for p in wire_hit["parts"])
    return [record_from_wire(Part, p) for p in wire_hit["parts"]]


@pytest.fixture
def alice(new_user: NewUser) -> tuple[Account, str]:
    """A user with a cube holding ``TURNS``."""
    account = new_user("alice")
    cube_id = account.http.post("/mem_cubes", json={"name": "notes"}).json()["cube_id"]
    added = account.http.post("/memories", json={"cube_id": cube_id, "messages": TURNS})
    assert added.status_code == 200, added.text
    settle(account, cube_id)
    return account, cube_id


def settle(account: Account, cube_id: str) -> None:
    """Wait for the cube's background tasks (the tiers move turns between searches otherwise,
    and two searches compared must see the same cube)."""
    waited = account.http.post("/tasks/wait", json={"cube_id": cube_id, "timeout_s": 60})
    assert waited.status_code == 200 and waited.json()["done"], waited.text


# -- REST --------------------------------------------------------------------------------------


def test_rest_search_gives_parts_only_with_explain(alice: tuple[Account, str]) -> None:
    account, cube_id = alice
    body = {"query": QUERY, "cube_ids": [cube_id], "top_k": 5}
    plain = account.http.post("/search", json=body)
    assert plain.status_code == 200, plain.text
    assert plain.json()["hits"] and all("parts" not in h for h in plain.json()["hits"])
    settle(account, cube_id)
    explained = account.http.post("/search", json=body | {"explain": True})
    assert explained.status_code == 200, explained.text
    hits = explained.json()["hits"]
    assert [h["id"] for h in hits] == [h["id"] for h in plain.json()["hits"]]
    for hit in hits:
        assert_explained(hit["score"], hit["ranks"], parts_of(hit))
    # the same fields besides (an item's access count moves with each search), and the same
    # scores; explain is a boolean like any other field
    assert [set(h) - {"parts"} for h in hits] == [set(h) for h in plain.json()["hits"]]
    assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in plain.json()["hits"]])
    refused = account.http.post("/search", json=body | {"explain": "very"})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_input"


def test_context_hits_carry_no_parts(alice: tuple[Account, str]) -> None:
    """``/context`` is unchanged: its hits are for a prompt, not for a reader of rankings."""
    account, cube_id = alice
    packed = account.http.post("/context", json={"query": QUERY, "cube_ids": [cube_id]})
    assert packed.status_code == 200, packed.text
    assert packed.json()["hits"] and all("parts" not in h for h in packed.json()["hits"])


# -- the Python client ---------------------------------------------------------------------------


@pytest.fixture
def connected(alice: tuple[Account, str], server: Server) -> Iterator[tuple[Client, str]]:
    account, cube_id = alice
    with Client(server.url, account.key) as client:
        yield client, cube_id


def test_client_search_explain_fills_hit_parts(connected: tuple[Client, str]) -> None:
    client, cube_id = connected
    plain = client.search(QUERY, cube_ids=[cube_id], top_k=5)
    assert plain and all(h.parts == () for h in plain)
    assert client.wait(cube_id, timeout=60)
    explained = client.search(QUERY, cube_ids=[cube_id], top_k=5, explain=True)
    assert [h.item.id for h in explained] == [h.item.id for h in plain]
    for hit in explained:
        assert isinstance(hit, Hit)
        assert_explained(hit.score, hit.ranks, hit.parts)


def test_async_client_search_explain_fills_hit_parts(
    alice: tuple[Account, str], server: Server
) -> None:
    account, cube_id = alice

    async def search() -> list[Hit]:
        async with AsyncClient(server.url, account.key) as client:
            return await client.search(QUERY, cube_ids=[cube_id], explain=True)

    hits = asyncio.run(search())
    assert hits
    for hit in hits:
        assert_explained(hit.score, hit.ranks, hit.parts)


# -- MCP -----------------------------------------------------------------------------------------


@pytest.fixture
def memory(db_path: Path) -> Iterator[MemoryOS]:
    with MemoryOS.open(str(db_path), workers=0) as mos:
        mos.create_user("alice")
        mos.create_cube("notes", owner="alice", cube_id="notes")
        mos.add(TURNS, user_id="alice", cube_id="notes")
        yield mos


async def _mcp_search(memory: MemoryOS, **arguments: Any) -> list[dict[str, Any]]:
    server = build_server(memory, fixed_caller(memory, "alice", "notes"))
    async with MCPClient(server) as client:
        result = await client.call_tool("search_memories", {"query": QUERY, **arguments})
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    found: list[dict[str, Any]] = result.structured_content["hits"]
    return found


def test_mcp_search_explain_gives_each_hit_its_parts(memory: MemoryOS) -> None:
    plain = asyncio.run(_mcp_search(memory))
    assert plain and all(set(h) == {"item", "score", "ranks"} for h in plain)
    assert memory.wait("notes", timeout=60)
    explained = asyncio.run(_mcp_search(memory, explain=True))
    assert [h["item"]["id"] for h in explained] == [h["item"]["id"] for h in plain]
    for hit in explained:
        assert set(hit) == {"item", "score", "ranks", "parts"}
        assert_explained(hit["score"], hit["ranks"], parts_of(hit))
