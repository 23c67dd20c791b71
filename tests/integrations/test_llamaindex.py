"""The LlamaIndex adapter against the real ``llama-index-core``: ``MemstrataMemoryBlock`` runs
the same script as LlamaIndex's ``VectorMemoryBlock`` (over a vector store that keeps text, as
that block requires) with equal results, ranking and rendering aside; a ``Memory`` with the
block and a ``MockLLM`` remembers a fact in one session and uses it in another; one user's
block never reads another's; and the docs example runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memstrata import AsyncMemoryOS, MemoryOS
from memstrata.errors import PermissionDenied, ValidationError
from tests.integrations.frameworks import framework, run_example

framework("llama_index.core", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.bridge.pydantic import Field  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.memory import Memory, VectorMemoryBlock  # noqa: E402
from llama_index.core.schema import BaseNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402

from memstrata.integrations.llamaindex import MemstrataMemoryBlock  # noqa: E402

pytestmark = pytest.mark.engines("sqlite", "postgres")

FACTS = ("lives in Porto", "sister Mia", "green tea")


class TextStore(BasePydanticVectorStore):
    """The smallest vector store that keeps text (``VectorMemoryBlock`` needs one; the core
    package has none): every node, each query answered with all of them, best first."""

    stores_text: bool = True
    nodes: list[BaseNode] = Field(default_factory=list)

    @property
    def client(self) -> Any:
        return None

    def add(self, nodes: Any, **kwargs: Any) -> list[str]:
        self.nodes.extend(nodes)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        self.nodes = [n for n in self.nodes if n.ref_doc_id != ref_doc_id]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        found = self.nodes[: query.similarity_top_k]
        return VectorStoreQueryResult(nodes=found, similarities=[1.0] * len(found))


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def script(block: Any) -> list[Any]:
    """A script of memory block calls; what each returns, as far as two blocks can agree: the
    type, and which known facts a recall holds (rendering and ranking are each block's)."""
    facts = lambda text: sorted(f for f in FACTS if f in text)  # noqa: E731
    out: list[Any] = [await block.aget(None), await block.aget([])]
    out.append(await block.aget([user("where do I live?")]))  # nothing stored yet
    await block.aput([])
    await block.aput([ChatMessage(role="user", content="")])  # no text: nothing to store
    out.append(await block.aget([user("where do I live?")]))
    await block.aput(
        [user("Ann lives in Porto"), ChatMessage(role="assistant", content="her sister Mia too")],
        session_id="monday",
    )
    await block.aput([user("Ann drinks green tea")], session_id="tuesday")
    recalled = await block.aget([user("hi"), user("tell me about Ann")], session_id="x")
    out.append((type(recalled).__name__, facts(recalled)))
    block.accept_short_term_memory = False
    await block.aput([user("she likes chess")], from_short_term_memory=True)  # refused
    out.append("chess" in await block.aget([user("what does Ann like, chess?")]))
    out.append(await block.atruncate(recalled, 10_000))
    return out


def test_the_block_answers_as_llamaindexs_vector_block(mos: MemoryOS) -> None:
    ours = asyncio.run(script(MemstrataMemoryBlock(mos, user_id="ann", similarity_top_k=10)))
    reference = VectorMemoryBlock(
        vector_store=TextStore(), embed_model=MockEmbedding(embed_dim=8), similarity_top_k=10
    )
    assert ours == asyncio.run(script(reference))


def test_messages_are_turns_of_their_session(mos: MemoryOS) -> None:
    block = MemstrataMemoryBlock(mos, user_id="ann")
    message = ChatMessage(role="tool", content="sunny", additional_kwargs={"session_id": "s 1"})
    asyncio.run(block.aput([user("Ann lives in Porto"), message], session_id="mon"))
    turns = mos.list_memories(block.cube_id, user_id="ann", filters={"session_id": "mon"})
    assert [(t.role, t.text) for t in turns] == [
        ("user", "Ann lives in Porto"),
        ("tool_result", "sunny"),
    ]


def test_truncation_drops_the_last_memories_first(mos: MemoryOS) -> None:
    block = MemstrataMemoryBlock(mos, user_id="ann")
    content = "one two three\n\nfour five\n\nsix"
    assert asyncio.run(block.atruncate(content, 1)) == "one two three\n\nfour five"
    assert asyncio.run(block.atruncate(content, 3)) == "one two three"
    assert asyncio.run(block.atruncate(content, 6)) is None


def test_bad_input_changes_nothing(mos: MemoryOS) -> None:
    block = MemstrataMemoryBlock(mos, user_id="ann")
    with pytest.raises(ValidationError):
        asyncio.run(block.aput([user("fine"), user("x" * 40_000)]))
    assert mos.list_memories(block.cube_id, user_id="ann") == []


def test_one_users_block_never_reads_anothers(mos: MemoryOS) -> None:
    ann = MemstrataMemoryBlock(mos, user_id="ann")
    asyncio.run(ann.aput([user("my PIN is 4321")]))
    bob = MemstrataMemoryBlock(mos, user_id="bob")
    assert asyncio.run(bob.aget([user("what is my PIN?")])) == ""
    with pytest.raises(PermissionDenied):
        MemstrataMemoryBlock(mos, user_id="bob", cube_id=ann.cube_id)


async def chat(memory: Memory, text: str) -> str:
    """One exchange as a LlamaIndex app has it: the user's message in, the memory's messages
    (with the blocks' recall) to the LLM, its answer back into memory."""
    llm = MockLLM()  # answers with the prompt it was given: what the model saw
    await memory.aput(user(text))
    answer = (await llm.achat(await memory.aget(input=text))).message
    await memory.aput(answer)
    return str(answer.content)


async def remember_then_use(memory: Any, **who: Any) -> str:
    """Monday's chat overflows the short-term queue, so its first exchange is flushed to the
    block; Tuesday's question (another session) is answered with the block's recall.  What the
    model saw on Tuesday."""
    engine = create_async_engine("sqlite+aiosqlite:///:memory:")
    try:

        def session(name: str) -> Memory:
            block = MemstrataMemoryBlock(memory, priority=1, **who)
            return Memory.from_defaults(
                session_id=name, token_limit=60, token_flush_size=10, memory_blocks=[block],
                tokenizer_fn=str.split, async_engine=engine,
            )  # fmt: skip

        monday = session("monday")
        await chat(monday, "I live in Porto with my cat Miso")
        for n in range(3):
            await chat(monday, f"small talk number {n}")
        return await chat(session("tuesday"), "What is my cat called?")
    finally:
        await engine.dispose()


def test_a_memory_remembers_in_one_session_and_uses_it_in_another(mos: MemoryOS) -> None:
    seen = asyncio.run(remember_then_use(mos, user_id="ann"))
    assert "Miso" in seen  # recalled from Monday's session by the block
    turns = mos.list_memories(mos.default_cube("ann").cube_id, user_id="ann")
    assert turns[0].text == "I live in Porto with my cat Miso" and turns[0].session_id == "monday"


def test_an_async_memory_os_serves_the_block(mos: MemoryOS) -> None:
    async def run() -> str:
        memory = AsyncMemoryOS(mos)
        try:
            return await remember_then_use(memory, user_id="ann")
        finally:
            await memory.aclose()

    assert "Miso" in asyncio.run(run())


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens memory.db in the working directory
    for _ in range(2):  # run again on the same file: it must work the second time too
        run_example("llamaindex.md")
