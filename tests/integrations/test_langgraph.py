"""The LangGraph adapters against the real LangGraph: ``MemstrataStore`` runs the same script
as LangGraph's ``InMemoryStore`` with equal results (a query's ranking aside), ``MemstrataSaver``
passes LangGraph's checkpointer conformance suite, each keeps one user's data from another, and
the docs example (remembered in one thread, used in another) runs."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memstrata import MemoryOS
from memstrata.errors import PermissionDenied
from tests.integrations.frameworks import framework, run_example

framework("langgraph.store.memory", "langgraph")
conformance = framework("langgraph.checkpoint.conformance", "conformance")

from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memstrata.integrations.langgraph import MemstrataSaver, MemstrataStore  # noqa: E402

pytestmark = pytest.mark.engines("sqlite", "postgres")

PREFS = ("users", "ann", "prefs")


def store_script(store: BaseStore) -> list[Any]:
    """A script of LangGraph store calls; what each returns, comparable across stores."""
    out: list[Any] = []
    store.put(PREFS, "food", {"text": "likes pizza", "n": 3, "tags": ["a", "b"]})
    store.put(PREFS, "drink", {"text": "drinks green tea", "n": 5})
    store.put(("users", "bob"), "food", {"text": "likes sushi", "n": 1}, index=False)
    store.put(("notes",), "n1", {"text": "the meeting is on Friday", "nested": {"k": 1}})
    store.put(PREFS, "food", {"text": "likes pasta", "n": 4, "tags": ["a", "b"]})  # replaces
    got = store.get(PREFS, "food")
    out.append(None if got is None else (got.namespace, got.key, got.value))
    out.append(store.get(PREFS, "missing"))
    listed = lambda found: sorted((i.namespace, i.key, repr(i.value)) for i in found)  # noqa: E731
    out.append(listed(store.search(("users",))))
    out.append(listed(store.search(())))
    out.append(listed(store.search(("users",), filter={"n": {"$gte": 4}})))
    out.append(listed(store.search(("users",), filter={"n": {"$ne": 5}, "tags": ["a", "b"]})))
    out.append(listed(store.search((), filter={"nested": {"k": 1}})))
    out.append(len(store.search(("users",), limit=2)) + len(store.search(("users",), offset=2)))
    out.append(listed(store.search(("users", "ann"), query="what food do they like", limit=10)))
    out.append(store.list_namespaces())
    out.append(store.list_namespaces(prefix=("users",), max_depth=2))
    out.append(store.list_namespaces(suffix=("prefs",)))
    out.append(store.list_namespaces(prefix=("users", "*")))
    out.append(store.list_namespaces(limit=1, offset=1))
    store.delete(PREFS, "drink")
    store.delete(PREFS, "never-there")
    out.append(store.get(PREFS, "drink"))
    out.append(listed(store.search(())))
    out.append(asyncio.run(store.aget(("notes",), "n1")).value)  # type: ignore[union-attr]
    return out


def test_the_store_answers_as_langgraphs_in_memory_store(mos: MemoryOS) -> None:
    ours = store_script(MemstrataStore(mos, user_id="ann"))
    reference = store_script(InMemoryStore())
    assert ours == reference


def test_a_query_ranks_by_meaning_within_the_namespace(mos: MemoryOS) -> None:
    store = MemstrataStore(mos, user_id="ann")
    store.put(PREFS, "food", {"text": "Ann's favourite food is pasta"})
    store.put(PREFS, "city", {"text": "Ann lives in Porto"})
    store.put(("other",), "city", {"text": "Bob lives in Lisbon"})
    store.put(PREFS, "plain", {"text": "lives nowhere"}, index=False)
    found = store.search(PREFS, query="where does she live?", limit=3)
    assert [i.key for i in found] == ["city", "food", "plain"]
    assert found[0].score is not None and found[0].score > found[1].score  # type: ignore[operator]
    assert found[2].score is None  # unindexed items fill the page, unranked
    # index fields: only the named field is what search ranks
    store.put(PREFS, "pet", {"title": "zebra", "body": "a cat named Tom"}, index=["title"])
    assert store.search(PREFS, query="zebra", limit=1)[0].key == "pet"


def test_put_writes_versions_and_delete_erases(mos: MemoryOS) -> None:
    store = MemstrataStore(mos, user_id="ann", index={"fields": ["text"]})
    store.put(PREFS, "food", {"text": "likes pizza"})
    store.put(PREFS, "food", {"text": "likes pasta"})
    (item,) = mos.list_memories(
        store.cube_id, user_id="ann", filters={"metadata": {"lg.key": "food"}}
    )
    assert [v.item.text for v in mos.history(item.id, user_id="ann")] == [
        "likes pizza",
        "likes pasta",
    ]
    store.delete(PREFS, "food")
    gone = mos.list_memories(
        store.cube_id,
        user_id="ann",
        filters={"status": ["deleted"], "metadata": {"lg.key": "food"}},
    )
    assert gone == []  # erased: its text and metadata are blanked, not merely marked deleted
    assert not any(
        "pasta" in i.text
        for i in mos.list_memories(store.cube_id, user_id="ann", filters={"status": ["deleted"]})
    )


def test_ttl_is_the_items_expiry_and_a_read_refreshes_it(mos: MemoryOS) -> None:
    store = MemstrataStore(mos, user_id="ann", ttl={"default_ttl": 60, "refresh_on_read": True})
    store.put(PREFS, "food", {"text": "likes pizza"})  # the default TTL: an hour
    store.put(PREFS, "forever", {"text": "likes tea"}, ttl=None)
    (item,) = mos.list_memories(
        store.cube_id, user_id="ann", filters={"metadata": {"lg.key": "food"}}
    )
    assert item.expires_at is not None
    left = item.expires_at - datetime.now(timezone.utc)
    assert timedelta(minutes=50) < left <= timedelta(minutes=60)
    store.get(PREFS, "food")
    (again,) = mos.list_memories(
        store.cube_id, user_id="ann", filters={"metadata": {"lg.key": "food"}}
    )
    assert again.expires_at is not None and again.expires_at >= item.expires_at
    (kept,) = mos.list_memories(
        store.cube_id, user_id="ann", filters={"metadata": {"lg.key": "forever"}}
    )
    assert kept.expires_at is None
    store.put(PREFS, "gone", {"text": "x"}, ttl=-1)  # expired at once: no read returns it
    assert store.get(PREFS, "gone") is None


def test_one_users_store_never_reads_anothers(mos: MemoryOS) -> None:
    ann = MemstrataStore(mos, user_id="ann")
    ann.put(PREFS, "food", {"text": "likes pasta"})
    assert ann.get(("users",), "food") is None  # a prefix is not the namespace
    bob = MemstrataStore(mos, user_id="bob")
    assert bob.get(PREFS, "food") is None
    assert bob.search(()) == [] and bob.search((), query="pasta") == []
    assert bob.list_namespaces() == []
    with pytest.raises(PermissionDenied):
        MemstrataStore(mos, user_id="bob", cube_id=ann.cube_id)


# -- the checkpointer --------------------------------------------------------------------------


def test_the_saver_passes_langgraphs_conformance_suite(mos: MemoryOS) -> None:
    @conformance.checkpointer_test(name="MemstrataSaver")
    async def saver() -> Any:
        yield MemstrataSaver(mos, user_id="ann")

    report = asyncio.run(conformance.validate(saver))
    for capability in BASE_CAPABILITIES:
        result = report.results[capability.value]
        assert result.passed, (capability.value, result.failures)
        assert result.tests_failed == 0 and result.tests_passed > 0


def graph(saver: Any) -> Any:
    """A graph of one node that answers each message with its count."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"message {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    return builder.compile(checkpointer=saver)


def saver_script(saver: Any) -> list[Any]:
    """Runs of a graph over a checkpointer; what a user of LangGraph sees of them."""
    g = graph(saver)
    one = {"configurable": {"thread_id": "one"}}
    two = {"configurable": {"thread_id": "two"}}
    g.invoke({"messages": [("user", "hello")]}, one)
    g.invoke({"messages": [("user", "again")]}, one)
    g.invoke({"messages": [("user", "other thread")]}, two)
    texts = lambda c: [m.content for m in g.get_state(c).values["messages"]]  # noqa: E731
    out: list[Any] = [texts(one), texts(two)]
    out.append([s.metadata["step"] for s in g.get_state_history(one)])
    saver.delete_thread("one")
    out.append(g.get_state(one).values)
    out.append(texts(two))
    return out


def test_the_saver_runs_a_graph_as_langgraphs_in_memory_saver(mos: MemoryOS) -> None:
    assert saver_script(MemstrataSaver(mos, user_id="ann")) == saver_script(InMemorySaver())


def test_a_threads_messages_flow_into_the_users_memory_once(mos: MemoryOS) -> None:
    g = graph(MemstrataSaver(mos, user_id="ann"))
    config = {"configurable": {"thread_id": "t-1"}}
    g.invoke({"messages": [("user", "my sister Mia lives in Oslo")]}, config)
    g.invoke({"messages": [("user", "and my brother in Rome")]}, config)
    cube = mos.default_cube("ann").cube_id
    turns = mos.list_memories(cube, user_id="ann", filters={"session_id": "t-1", "type": "turn"})
    assert [(t.role, t.text) for t in turns] == [
        ("user", "my sister Mia lives in Oslo"),
        ("assistant", "message 1"),
        ("user", "and my brother in Rome"),
        ("assistant", "message 3"),
    ]
    hits = mos.search("where does Mia live", user_id="ann")
    assert hits[0].item.text == "my sister Mia lives in Oslo"  # checkpoints never come up


def test_one_users_saver_never_reads_anothers_threads(mos: MemoryOS) -> None:
    ann = MemstrataSaver(mos, user_id="ann")
    graph(ann).invoke({"messages": [("user", "secret plan")]}, {"configurable": {"thread_id": "t"}})
    bob = MemstrataSaver(mos, user_id="bob")
    assert bob.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert list(bob.list(None)) == [] and list(bob.list({"configurable": {"thread_id": "t"}})) == []
    bob.delete_thread("t")  # a no-op for bob: ann's thread stays
    assert ann.get_tuple({"configurable": {"thread_id": "t"}}) is not None
    assert mos.search("secret plan", user_id="bob") == []


def test_a_thread_cube_made_by_someone_else_is_refused(mos: MemoryOS) -> None:
    """Mallory makes the cube ann's thread would use and shares it with ann, to read what ann's
    agent writes there: the saver refuses the cube instead of writing into it."""
    probe = MemstrataSaver(mos, user_id="ann")
    mos.create_user("mallory")
    from memstrata.integrations.mapping import digest

    cube_id = f"lgt-{digest('ann', 'stolen')}"
    mos.create_cube("trap", owner="mallory", cube_id=cube_id)
    mos.grant(cube_id, "ann", "write", by="mallory")
    with pytest.raises(PermissionDenied):
        graph(probe).invoke(
            {"messages": [("user", "secret")]}, {"configurable": {"thread_id": "stolen"}}
        )
    assert mos.list_memories(cube_id, user_id="mallory") == []


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens memory.db in the working directory
    for _ in range(2):  # run again on the same file: it must work the second time too
        run_example("langgraph.md")
