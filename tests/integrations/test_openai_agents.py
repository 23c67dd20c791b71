"""The OpenAI Agents SDK adapter against the real ``openai-agents``: ``MemstrataSession`` runs
the same script as the SDK's ``SQLiteSession`` with equal results, an agent (the SDK's own
``ScriptedModel``, no network) remembers a fact in one session with ``memory_tools`` and uses
it in another, one user's session never reads another's, and the docs example runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from memstrata import AsyncMemoryOS, MemoryOS
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework, run_example

framework("agents", "openai-agents")

from agents import Agent, RunConfig, Runner  # noqa: E402
from agents.memory import SessionSettings, SQLiteSession  # noqa: E402
from agents.testing import (  # noqa: E402
    ModelCall,
    ModelStep,
    ScriptedModel,
    assistant_message,
    function_call,
)

from memstrata.integrations.openai_agents import MemstrataSession, memory_tools  # noqa: E402

pytestmark = pytest.mark.engines("sqlite", "postgres")

ITEMS: list[Any] = [
    {"role": "user", "content": "Hi, I'm Ann and I live in Porto"},
    {"role": "developer", "content": "be brief"},
    {
        "type": "function_call",
        "call_id": "c1",
        "name": "weather",
        "arguments": '{"city": "Porto"}',
        "id": "fc_1",
    },
    {"type": "function_call_output", "call_id": "c1", "output": "sunny, 24 C"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny in Porto.", "annotations": []}],
    },
    {"role": "user", "content": [{"type": "input_text", "text": "a list of parts"}]},
]


async def script(session: Any) -> list[Any]:
    """A script of ``Session`` calls; what each returns, comparable across sessions."""
    out: list[Any] = []
    await session.add_items(ITEMS[:3])
    await session.add_items([])
    await session.add_items(ITEMS[3:])
    out.append(await session.get_items())
    out.append(await session.get_items(limit=2))
    out.append(await session.get_items(limit=0))
    out.append(await session.get_items(limit=-1) == await session.get_items())
    out.append(await session.pop_item())
    out.append(await session.pop_item())
    out.append(len(await session.get_items()))
    await session.clear_session()
    out.append(await session.get_items())
    out.append(await session.pop_item())
    await session.add_items([{"role": "user", "content": "after clear"}])
    out.append(await session.get_items())
    return out


def test_the_session_answers_as_the_sdks_sqlite_session(mos: MemoryOS) -> None:
    ours = asyncio.run(script(MemstrataSession(mos, user_id="ann", session_id="chat 1")))
    assert ours == asyncio.run(script(SQLiteSession("chat 1")))


def test_session_settings_limit_the_items_as_the_sdks(mos: MemoryOS) -> None:
    async def run(session: Any) -> list[Any]:
        await session.add_items(ITEMS)
        return [await session.get_items(), await session.get_items(limit=4)]

    settings = SessionSettings(limit=3)
    ours = MemstrataSession(mos, user_id="ann", session_id="s", session_settings=settings)
    assert asyncio.run(run(ours)) == asyncio.run(run(SQLiteSession("s", session_settings=settings)))


def test_items_are_turns_of_the_session(mos: MemoryOS) -> None:
    session = MemstrataSession(mos, user_id="ann", session_id="s-1")
    asyncio.run(session.add_items(ITEMS))
    turns = mos.list_memories(session.cube_id, user_id="ann", filters={"session_id": "s-1"})
    assert [(t.role, t.text) for t in turns] == [
        ("user", "Hi, I'm Ann and I live in Porto"),
        ("system", "be brief"),
        ("tool_call", "(tool call: weather)"),
        ("tool_result", "sunny, 24 C"),
        ("assistant", "Sunny in Porto."),
        ("user", "a list of parts"),
    ]
    mos.add("and I like tea", user_id="ann", cube_id=session.cube_id, session_id="s-1")
    assert asyncio.run(session.get_items(limit=1)) == [
        {"role": "user", "content": "and I like tea"}
    ]
    odd = MemstrataSession(mos, user_id="ann", session_id="not an id/with spaces")
    assert odd.session.startswith("oa-") and asyncio.run(odd.get_items()) == []


def test_bad_input_changes_nothing(mos: MemoryOS) -> None:
    session = MemstrataSession(mos, user_id="ann", session_id="s-1")
    with pytest.raises(ValidationError):
        asyncio.run(session.add_items([ITEMS[0], {"role": "user", "content": "x" * 40_000}]))
    assert asyncio.run(session.get_items()) == []


def test_one_users_session_never_reads_anothers(mos: MemoryOS) -> None:
    ann = MemstrataSession(mos, user_id="ann", session_id="shared-name")
    asyncio.run(ann.add_items([{"role": "user", "content": "my PIN is 4321"}]))
    bob = MemstrataSession(mos, user_id="bob", session_id="shared-name")
    assert asyncio.run(bob.get_items()) == [] and asyncio.run(bob.pop_item()) is None
    asyncio.run(bob.clear_session())  # erases bob's session only
    assert asyncio.run(ann.get_items()) == [{"role": "user", "content": "my PIN is 4321"}]
    (search, _) = memory_tools(mos, user_id="bob")
    assert "4321" not in asyncio.run(_invoke(search, {"query": "PIN"}))
    with pytest.raises(PermissionDenied):
        MemstrataSession(mos, user_id="bob", session_id="x", cube_id=ann.cube_id)


async def _invoke(tool: Any, arguments: dict[str, Any]) -> str:
    """Call a function tool as the SDK's runner does (its JSON arguments)."""
    from agents.tool_context import ToolContext

    context = ToolContext(
        context=None, tool_name=tool.name, tool_call_id="t", tool_arguments=json.dumps(arguments)
    )
    return str(await tool.on_invoke_tool(context, json.dumps(arguments)))


def answer_from_the_tool(call: ModelCall) -> list[Any]:
    """The scripted model's last step: it answers with what the memory search returned."""
    outputs = [i for i in call.input if i.get("type") == "function_call_output"]
    found = json.loads(outputs[-1]["output"])
    return [assistant_message("From memory: " + " | ".join(hit["text"] for hit in found))]


async def remember_then_use(memory: Any, **who: Any) -> tuple[str, list[Any]]:
    """Session one: the agent saves a fact; session two: it searches memory and answers from it.
    The final answer, and session two's items."""
    model = ScriptedModel(
        [
            [function_call("remember", {"text": "Ann lives in Porto"}, call_id="c1")],
            [assistant_message("Noted: you live in Porto.")],
            [function_call("search_memory", {"query": "where does Ann live"}, call_id="c2")],
            ModelStep.respond(answer_from_the_tool),
        ]
    )
    agent = Agent(name="assistant", model=model, tools=memory_tools(memory, **who))
    config = RunConfig(tracing_disabled=True)
    one = MemstrataSession(memory, session_id="monday", **who)
    await Runner.run(agent, "I live in Porto", session=one, run_config=config)
    two = MemstrataSession(memory, session_id="tuesday", **who)
    result = await Runner.run(agent, "Where do I live?", session=two, run_config=config)
    model.assert_complete()
    return str(result.final_output), await two.get_items()


def test_an_agent_remembers_in_one_session_and_uses_it_in_another(mos: MemoryOS) -> None:
    answer, items = asyncio.run(remember_then_use(mos, user_id="ann"))
    assert answer.startswith("From memory:") and "Ann lives in Porto" in answer
    assert items[0] == {"role": "user", "content": "Where do I live?"}
    assert not any(i.get("content") == "I live in Porto" for i in items)  # sessions apart


def test_an_async_memory_os_serves_the_session(mos: MemoryOS) -> None:
    async def run() -> tuple[str, list[Any]]:
        memory = AsyncMemoryOS(mos)
        try:
            return await remember_then_use(memory, user_id="ann")
        finally:
            await memory.aclose()

    assert "Ann lives in Porto" in asyncio.run(run())[0]


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens memory.db in the working directory
    for _ in range(2):  # run again on the same file: it must work the second time too
        run_example("openai-agents.md")
