"""Every adapter over the REST API: given a ``Client`` or ``AsyncClient`` in place of a
``MemoryOS``, each runs its framework's reference script with the same results, acts as the
API key's owner (another ``user_id`` is refused), and never reads another user's memory; the
async paths use the ``AsyncClient`` itself.  Also the one REST addition the adapters need:
``GET /memories/{cube_id}?metadata=`` (LangGraph finds its items by metadata)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from memstrata.client import AsyncClient, Client
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework
from tests.server.conftest import Account, Server

framework("langgraph.store.memory", "langgraph")
framework("agents", "openai-agents")
framework("llama_index.core", "llamaindex")

from langchain_core.chat_history import InMemoryChatMessageHistory  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memstrata.integrations.langchain import MemstrataChatMessageHistory  # noqa: E402
from memstrata.integrations.langgraph import MemstrataSaver, MemstrataStore  # noqa: E402
from memstrata.integrations.llamaindex import MemstrataMemoryBlock  # noqa: E402
from memstrata.integrations.openai_agents import MemstrataSession  # noqa: E402
from tests.integrations import (  # noqa: E402
    test_langchain,
    test_langgraph,
    test_llamaindex,
    test_openai_agents,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:The class `InMemoryChatMessageHistory` was deprecated"
)

Make = Callable[..., Account]


def client(server: Server, account: Account) -> Client:
    return Client(server.url, account.key, timeout=120)


# -- the REST addition ---------------------------------------------------------------------------


def test_a_cubes_items_are_listed_by_metadata(server: Server, new_user: Make) -> None:
    ann = new_user("ann")
    with client(server, ann) as memory:
        cube = memory.create_cube("notes").cube_id
        memory.add([{"content": "tea", "metadata": {"k": "a", "n": 1}}], cube_id=cube)
        memory.add([{"content": "coffee", "metadata": {"k": "b", "n": 1}}], cube_id=cube)
        found = memory.list_memories(cube, filters={"metadata": {"k": "b"}})
        assert [i.text for i in found] == ["coffee"]
        assert len(memory.list_memories(cube, filters={"metadata": {"n": 1}})) == 2
        assert memory.list_memories(cube, filters={"metadata": {"n": True}}) == []
    for bad in ["{not json", "[1, 2]", json.dumps({"k": {"nested": 1}})]:
        answer = ann.http.get(f"/memories/{cube}", params={"metadata": bad})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "invalid_input"


# -- each adapter over a Client ------------------------------------------------------------------


def test_langchain_history_over_a_client(server: Server, new_user: Make) -> None:
    with client(server, new_user("ann")) as memory:
        ours = test_langchain.script(MemstrataChatMessageHistory(memory, session_id="chat 1"))
    assert ours == test_langchain.script(InMemoryChatMessageHistory())


def test_langgraph_store_over_a_client(server: Server, new_user: Make) -> None:
    with client(server, new_user("ann")) as memory:
        ours = test_langgraph.store_script(MemstrataStore(memory))
    assert ours == test_langgraph.store_script(InMemoryStore())


def test_langgraph_saver_over_a_client(server: Server, new_user: Make) -> None:
    ann = new_user("ann")
    with client(server, ann) as memory:
        ours = test_langgraph.saver_script(MemstrataSaver(memory, user_id=ann.user_id))
    assert ours == test_langgraph.saver_script(InMemorySaver())


def test_agents_session_over_a_client(server: Server, new_user: Make) -> None:
    with client(server, new_user("ann")) as memory:
        ours = asyncio.run(test_openai_agents.script(MemstrataSession(memory, session_id="c 1")))
    reference = test_openai_agents.SQLiteSession("c 1")
    assert ours == asyncio.run(test_openai_agents.script(reference))


# -- and over an AsyncClient ---------------------------------------------------------------------


def test_every_adapter_over_an_async_client(server: Server, new_user: Make) -> None:
    """The agents of the adapters' end-to-end tests, each remembering in one session and using
    it in another, with an ``AsyncClient``: its coroutines are what the adapters await."""
    ann, eve = new_user("ann"), new_user("eve")  # two users: each end-to-end in its own memory

    async def run() -> tuple[str, str, Any]:
        async with AsyncClient(server.url, eve.key, timeout=120) as memory:
            llama = await test_llamaindex.remember_then_use(memory, user_id=eve.user_id)
        async with AsyncClient(server.url, ann.key, timeout=120) as memory:
            agents, _ = await test_openai_agents.remember_then_use(memory)
            saver = MemstrataSaver(memory)
            graph = test_langgraph.graph(saver)
            config = {"configurable": {"thread_id": "t"}}
            await graph.ainvoke({"messages": [("user", "hello")]}, config)
            state = await graph.aget_state(config)
            history = MemstrataChatMessageHistory(memory, session_id="s")
            await history.aadd_messages([HumanMessage("hi")])
            return (
                agents,
                llama,
                (state.values["messages"][-1].content, await history.aget_messages()),
            )

    agents, llama, (last, messages) = asyncio.run(run())
    assert "Ann lives in Porto" in agents and "Miso" in llama
    assert last == "message 1" and messages == [HumanMessage("hi")]


def test_an_async_client_has_no_blocking_form(server: Server, new_user: Make) -> None:
    ann = new_user("ann")

    async def run() -> None:
        async with AsyncClient(server.url, ann.key) as memory:
            history = MemstrataChatMessageHistory(memory, session_id="s")
            with pytest.raises(TypeError, match="AsyncClient"):
                history.add_messages([HumanMessage("hi")])  # the sync form, on the loop
            assert await history.aget_messages() == []

    asyncio.run(run())


# -- who acts ------------------------------------------------------------------------------------


def test_the_user_is_the_keys_owner(server: Server, new_user: Make) -> None:
    ann, bob = new_user("ann"), new_user("bob")
    with client(server, ann) as memory:
        assert MemstrataStore(memory).user_id == ann.user_id
        assert MemstrataStore(memory, user_id=ann.user_id).user_id == ann.user_id
        with pytest.raises(ValidationError):
            MemstrataStore(memory, user_id=bob.user_id)

    async def run() -> None:
        async with AsyncClient(server.url, ann.key) as memory:
            session = MemstrataSession(memory, user_id=bob.user_id, session_id="s")
            with pytest.raises(ValidationError):  # found on the first call
                await session.get_items()

    asyncio.run(run())


def test_one_users_adapters_never_read_anothers_over_the_api(
    server: Server, new_user: Make
) -> None:
    ann, bob = new_user("ann"), new_user("bob")
    with client(server, ann) as a, client(server, bob) as b:
        MemstrataChatMessageHistory(a, session_id="s").add_messages([HumanMessage("PIN 4321")])
        MemstrataStore(a).put(("prefs",), "pin", {"text": "PIN 4321"})
        cube = MemstrataStore(a).cube_id
        assert MemstrataChatMessageHistory(b, session_id="s").messages == []
        assert MemstrataStore(b).search(("prefs",)) == []
        assert asyncio.run(MemstrataSession(b, session_id="s").get_items()) == []
        block = MemstrataMemoryBlock(b)
        assert asyncio.run(block.aget([test_llamaindex.user("what is my PIN?")])) == ""
        for make in (
            lambda: MemstrataStore(b, cube_id=cube),
            lambda: MemstrataChatMessageHistory(b, session_id="s", cube_id=cube),
            lambda: MemstrataMemoryBlock(b, cube_id=cube),
        ):
            with pytest.raises(PermissionDenied):
                make()
