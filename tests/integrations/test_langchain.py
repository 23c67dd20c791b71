"""The LangChain adapter against the real langchain-core: ``MemstrataChatMessageHistory`` runs
the same script as LangChain's ``InMemoryChatMessageHistory`` with equal results, keeps one
user's history from another, and the docs example (remembered in one session, used in
another) runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memstrata import MemoryOS
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework, run_example

framework("langchain_core.chat_history", "langchain")

from langchain_core.chat_history import (  # noqa: E402
    BaseChatMessageHistory,
    InMemoryChatMessageHistory,
)
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memstrata.integrations.langchain import MemstrataChatMessageHistory  # noqa: E402

pytestmark = [
    pytest.mark.engines("sqlite", "postgres"),
    # The reference is deprecated in langchain-core 1.6.4 (for LangGraph's state); it is still
    # what LangChain's own tests compare a history with.
    pytest.mark.filterwarnings("ignore:The class `InMemoryChatMessageHistory` was deprecated"),
]


def script(history: BaseChatMessageHistory) -> list[Any]:
    """A script of LangChain history calls; what each returns, comparable across histories."""
    out: list[Any] = []
    history.add_user_message("Hi, I'm Ann and I live in Porto")
    history.add_ai_message("Nice to meet you, Ann!")
    history.add_messages(
        [
            SystemMessage("be brief"),
            AIMessage("", tool_calls=[{"name": "search", "args": {"q": "Porto"}, "id": "c1"}]),
            ToolMessage("Porto is in Portugal", tool_call_id="c1"),
            HumanMessage("and again", id="m-1", name="ann"),
            HumanMessage([{"type": "text", "text": "a list of blocks"}]),
            ChatMessage("a critic's note", role="critic"),
        ]
    )
    out.append(list(history.messages))
    history.add_messages([])
    out.append(len(history.messages))
    history.clear()
    out.append(list(history.messages))
    asyncio.run(history.aadd_messages([HumanMessage("after clear")]))
    out.append(asyncio.run(history.aget_messages()))
    asyncio.run(history.aclear())
    out.append(asyncio.run(history.aget_messages()))
    return out


def test_the_history_answers_as_langchains_in_memory_history(mos: MemoryOS) -> None:
    ours = script(MemstrataChatMessageHistory(mos, user_id="ann", session_id="chat 1"))
    assert ours == script(InMemoryChatMessageHistory())


def test_messages_are_turns_of_the_session(mos: MemoryOS) -> None:
    history = MemstrataChatMessageHistory(mos, user_id="ann", session_id="s-1")
    history.add_messages([HumanMessage("I live in Porto"), AIMessage("Noted")])
    cube = mos.default_cube("ann").cube_id
    turns = mos.list_memories(cube, user_id="ann", filters={"session_id": "s-1"})
    assert [(t.role, t.text) for t in turns] == [
        ("user", "I live in Porto"),
        ("assistant", "Noted"),
    ]
    mos.add("and I like tea", user_id="ann", cube_id=cube, session_id="s-1")  # another surface
    assert history.messages[-1] == HumanMessage("and I like tea", name="ann")  # its speaker
    odd = MemstrataChatMessageHistory(mos, user_id="ann", session_id="not an id/with spaces")
    assert odd.session.startswith("lc-") and odd.messages == []


def test_clear_erases_the_session_for_good(mos: MemoryOS) -> None:
    history = MemstrataChatMessageHistory(mos, user_id="ann", session_id="s-1")
    history.add_messages([HumanMessage("my PIN is 4321")])
    history.clear()
    cube = mos.default_cube("ann").cube_id
    every = mos.list_memories(
        cube, user_id="ann", filters={"status": ["deleted", "generated", "activated"]}
    )
    assert not any("4321" in i.text for i in every)


def test_bad_input_changes_nothing(mos: MemoryOS) -> None:
    history = MemstrataChatMessageHistory(mos, user_id="ann", session_id="s-1")
    with pytest.raises(ValidationError):
        history.add_messages([HumanMessage("fine"), HumanMessage("x" * 40_000)])
    assert history.messages == []


def test_one_users_history_never_reads_anothers(mos: MemoryOS) -> None:
    ann = MemstrataChatMessageHistory(mos, user_id="ann", session_id="shared-name")
    ann.add_messages([HumanMessage("my PIN is 4321")])
    bob = MemstrataChatMessageHistory(mos, user_id="bob", session_id="shared-name")
    assert bob.messages == []
    bob.clear()  # erases bob's session only
    assert ann.messages == [HumanMessage("my PIN is 4321")]
    with pytest.raises(PermissionDenied):
        MemstrataChatMessageHistory(mos, user_id="bob", session_id="x", cube_id=ann.cube_id)


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens memory.db in the working directory
    for _ in range(2):  # run again on the same file: it must work the second time too
        run_example("langchain.md")
