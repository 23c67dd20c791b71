"""Every adapter over the REST API: given a ``Client`` or ``AsyncClient`` in place of a
``MemoryOS``, each runs its framework's reference script with the same results, acts as the
API key's owner (another ``user_id`` is refused), and never reads another user's memory; the
async paths use the ``AsyncClient`` itself.  Also the one REST addition the adapters need:
``GET /memories/{cube_id}?metadata=`` (LangGraph finds its items by metadata)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memstrata.client import AsyncClient, Client
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework
from tests.server.conftest import Account, Server

framework("langgraph.store.memory", "langgraph")
framework("agents", "openai-agents")
framework("llama_index.core", "llamaindex")
framework("autogen_core.memory", "autogen")
framework("google.adk.memory", "adk")
framework("pydantic_ai", "pydantic-ai")

from autogen_core.memory import ListMemory, MemoryContent  # noqa: E402
from google.adk.memory import InMemoryMemoryService  # noqa: E402
from langchain_core.chat_history import InMemoryChatMessageHistory  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from memstrata.integrations import autogen, pydantic_ai  # noqa: E402
from memstrata.integrations.adk import MemstrataMemoryService  # noqa: E402
from memstrata.integrations.langchain import MemstrataChatMessageHistory  # noqa: E402
from memstrata.integrations.langgraph import MemstrataSaver, MemstrataStore  # noqa: E402
from memstrata.integrations.llamaindex import MemstrataMemoryBlock  # noqa: E402
from memstrata.integrations.openai_agents import MemstrataSession  # noqa: E402
from tests.integrations import (  # noqa: E402
    test_adk,
    test_autogen,
    test_langchain,
    test_langgraph,
    test_llamaindex,
    test_openai_agents,
    test_pydantic_ai,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:The class `InMemoryChatMessageHistory` was deprecated"
)

Make = Callable[..., Account]


def client(server: Server, account: Account) -> Client:
    return Client(server.url, account.key, timeout=120)


async def remembered(memory: pydantic_ai.MemstrataMemory | None) -> list[str]:
    """Pydantic AI's script (tests/integrations/test_pydantic_ai.py): with ``memory``, every run
    a new conversation that recalls; with None, its own memory (the history carried)."""
    agent = Agent(FunctionModel(test_pydantic_ai.answer), capabilities=[memory] if memory else [])
    history: list[ModelMessage] = []
    out = []
    for said in test_pydantic_ai.SCRIPT:
        result = await agent.run(said, message_history=None if memory else history)
        history = result.all_messages()
        out.append(result.output)
    return out


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


def test_autogen_memory_over_a_client(server: Server, new_user: Make) -> None:
    with client(server, new_user("ann")) as memory:
        ours = asyncio.run(test_autogen.script(autogen.MemstrataMemory(memory, k=10)))
    assert ours == asyncio.run(test_autogen.script(ListMemory()))


def test_adk_service_over_a_client(server: Server, new_user: Make) -> None:
    ann = new_user("ann")
    with client(server, ann) as memory:
        service = MemstrataMemoryService(memory)
        ours = asyncio.run(test_adk.script(service, user=ann.user_id, stranger=None))
    reference = InMemoryMemoryService()
    assert ours == asyncio.run(test_adk.script(reference, user=ann.user_id, stranger=None))
    assert [m[0] for m in ours[1]] == ["e1", "e2", "e4", "e5"]


def test_pydantic_ai_memory_over_a_client(server: Server, new_user: Make) -> None:
    with client(server, new_user("ann")) as memory:
        ours = asyncio.run(remembered(pydantic_ai.MemstrataMemory(memory, k=10)))
    assert ours == asyncio.run(remembered(None))


# -- and over an AsyncClient ---------------------------------------------------------------------


class Counting(ThreadPoolExecutor):
    """A loop's default executor that counts the work it is given (``asyncio.to_thread``)."""

    given = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.given += 1
        return super().submit(fn, *args, **kwargs)


def test_the_async_adapters_over_an_async_client(server: Server, new_user: Make) -> None:
    """AutoGen, ADK and Pydantic AI given an ``AsyncClient`` run their reference scripts with the
    same results, its coroutines awaited on the loop itself: they give the loop's default
    executor (``asyncio.to_thread``'s) no more work than the frameworks' own memories do, so no
    thread waits there for a memory call."""
    ann = new_user("ann")

    async def run(use_memstrata: bool) -> tuple[list[Any], int]:
        executor = Counting(2)
        asyncio.get_running_loop().set_default_executor(executor)
        if not use_memstrata:
            return [
                await test_autogen.script(ListMemory()),
                await test_adk.script(InMemoryMemoryService(), user=ann.user_id, stranger=None),
                await remembered(None),
            ], executor.given
        async with AsyncClient(server.url, ann.key, timeout=120) as memory:
            service = MemstrataMemoryService(memory)
            own = f"{ann.user_id}-pai"  # a cube of its own: the ADK script told of green tea
            return [
                await test_autogen.script(autogen.MemstrataMemory(memory, k=10)),
                await test_adk.script(service, user=ann.user_id, stranger=None),
                await remembered(pydantic_ai.MemstrataMemory(memory, cube_id=own, k=10)),
            ], executor.given

    assert asyncio.run(run(True)) == asyncio.run(run(False))


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
            for agent_memory in (
                autogen.MemstrataMemory(memory, user_id=bob.user_id),
                pydantic_ai.MemstrataMemory(memory, user_id=bob.user_id),
            ):
                with pytest.raises(ValidationError):
                    await agent_memory.cube_id()
            with pytest.raises(ValidationError):  # ADK names its user in each call
                await MemstrataMemoryService(memory).search_memory(
                    app_name="app", user_id=bob.user_id, query="PIN"
                )
            assert await autogen.MemstrataMemory(memory).user_id() == ann.user_id

    asyncio.run(run())
    with client(server, ann) as memory, pytest.raises(ValidationError):
        asyncio.run(autogen.MemstrataMemory(memory, user_id=bob.user_id).query("PIN"))


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
        assert asyncio.run(async_adapters_recall(a, b)) == ([], [])
        for make in (
            lambda: MemstrataStore(b, cube_id=cube),
            lambda: MemstrataChatMessageHistory(b, session_id="s", cube_id=cube),
            lambda: MemstrataMemoryBlock(b, cube_id=cube),
        ):
            with pytest.raises(PermissionDenied):
                make()


async def async_adapters_recall(ann: Client, bob: Client) -> tuple[list[Any], list[Any]]:
    """Ann's AutoGen, ADK and Pydantic AI memories hold her PIN; what Bob's find of it (each
    adapter given his client); a Bob naming Ann's cube is ``PermissionDenied``."""
    ann_user, bob_user = ann.me().user_id, bob.me().user_id
    pin = MemoryContent(content="Ann's PIN is 4321", mime_type="text/plain")
    await autogen.MemstrataMemory(ann, name="shared").add(pin)
    events = [test_adk.event("user", "Ann's PIN is 4321", 1_700_000_000.0, "p1")]
    await MemstrataMemoryService(ann).add_events_to_memory(
        app_name="app", user_id=ann_user, events=events
    )
    cube = await autogen.MemstrataMemory(ann).cube_id()
    mine = await autogen.MemstrataMemory(bob, name="shared").query("PIN")
    adk = await MemstrataMemoryService(bob).search_memory(
        app_name="app", user_id=bob_user, query="PIN 4321"
    )
    sent: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(test_pydantic_ai.seen(messages))
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(model), capabilities=[pydantic_ai.MemstrataMemory(bob)]).run(
        "What is my PIN?"
    )
    assert sent and "4321" not in sent[0]
    for intruder in (
        autogen.MemstrataMemory(bob, cube_id=cube).query("PIN"),
        MemstrataMemoryService(bob, cube_id=cube).search_memory(
            app_name="app", user_id=bob_user, query="PIN"
        ),
    ):
        with pytest.raises(PermissionDenied):
            await intruder
    return mine.results, adk.memories
