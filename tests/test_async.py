"""``memstrata.AsyncMemoryOS``: every call of ``MemoryOS`` as a coroutine, on both engines.

The core is the real one (real database, the e5 embedder); the chat model is a fake
OpenAI-compatible API at the HTTP transport.  ``Gated`` is an embedder a user could pass to
``MemoryOS.open``: the real e5 whose ``embed_passages`` can be held, so that a test can cancel an
``add`` while its thread is mid-way (validated, embedding, nothing written yet) without timing.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from memstrata import AsyncMemoryOS, MemoryOS, Settings
from memstrata.embed import Embedder, make_embedder
from memstrata.embed.base import Vectors
from memstrata.errors import (
    LLMNotConfigured,
    NotFoundError,
    PermissionDenied,
    StorageError,
    ValidationError,
)
from memstrata.limits import MAX_ASYNC_THREADS
from memstrata.memory.aio import AsyncPieces, delegated_calls
from memstrata.memory.delegate import Delegate

pytestmark = pytest.mark.engines("sqlite", "postgres")

#: MemoryOS's calls whose async form has another name (asyncio's convention).
RENAMED = {"close": "aclose"}
TURNS = [
    {"role": "user", "name": "Ann", "content": f"Fact number {n} about Porto."} for n in range(5)
]


class Gated:
    """The real e5 embedder, whose ``embed_passages`` waits at a gate while one is set up."""

    def __init__(self, real: Embedder) -> None:
        self._real = real
        self.name, self.model_id = real.name, real.model_id
        self.entered = threading.Event()  # a call reached embed_passages
        self.release = threading.Event()  # let held calls go on
        self.release.set()
        self.threads: set[int] = set()
        self.inside = self.most_inside = 0
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self._real.dim

    def hold(self) -> None:
        """From now on, calls wait in ``embed_passages`` until ``release`` is set."""
        self.entered.clear()
        self.release.clear()

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            self.threads.add(threading.get_ident())
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            self.entered.set()
            self.release.wait(60)
            return self._real.embed_passages(texts)
        finally:
            with self._lock:
                self.inside -= 1

    def embed_query(self, text: str) -> Vectors:
        return self._real.embed_query(text)


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return make_embedder("e5", Settings())


@pytest.fixture
def gated(e5: Embedder, database: str) -> Iterator[tuple[MemoryOS, Gated]]:
    """A MemoryOS over ``Gated`` e5, with alice owning cube ``notes``."""
    embedder = Gated(e5)
    with MemoryOS.open(database, embedder=embedder, workers=0) as memory:
        memory.create_user("alice")
        memory.create_cube("notes", owner="alice", cube_id="notes")
        yield memory, embedder


def _public_calls(cls: type) -> list[str]:
    """The public methods of ``cls`` (its own, inherited, and its delegated calls)."""
    return [
        name
        for name in dir(cls)
        if not name.startswith("_")
        and not isinstance(inspect.getattr_static(cls, name), property)
        and callable(getattr(cls, name))
    ]


def _signature(call: Any) -> list[tuple[str, Any, Any, Any]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(call).parameters.values()
    ]


def test_every_call_of_memoryos_has_an_async_form_with_its_signature() -> None:
    """issue 27: a public method of MemoryOS without an async form, or with another signature
    (compared parameter by parameter), fails here."""
    calls = _public_calls(MemoryOS)
    assert len(delegated_calls()) >= 50 and set(delegated_calls()) <= set(calls)
    for name in calls:
        mine = getattr(AsyncMemoryOS, RENAMED.get(name, name), None)
        assert mine is not None, f"MemoryOS.{name} has no async form"
        if name == "open":
            theirs = _signature(MemoryOS.open)
            assert [p for p in _signature(AsyncMemoryOS.open) if p[0] != "threads"] == theirs
            continue
        assert inspect.iscoroutinefunction(mine), name
        assert _signature(mine) == _signature(getattr(MemoryOS, name)), name
        if name not in RENAMED:
            assert mine.__doc__ == getattr(MemoryOS, name).__doc__, name
    assert AsyncMemoryOS.RUNTIME_SETTINGS == MemoryOS.RUNTIME_SETTINGS


def test_every_delegate_returning_an_iterator_is_named_and_gets_async_pieces() -> None:
    """issue 27: the calls that return iterators are known (so each has a test of its async
    iterator form below); a new one fails here until it is looked at."""
    iterating = [
        name
        for name in delegated_calls()
        if "Iterator" in str(inspect.signature(getattr(MemoryOS, name)).return_annotation)
    ]
    assert iterating == ["chat_stream"]
    assert all(isinstance(vars(MemoryOS)[n], Delegate) for n in iterating)


def test_the_calls_run_the_core_and_raise_its_errors(mos: MemoryOS) -> None:
    """issue 27: results are the core's, bad input is the core's typed error, grants hold."""

    async def scenario() -> None:
        async with AsyncMemoryOS(mos, threads=2) as amos:
            assert amos.sync is mos and amos.settings is mos.settings
            await amos.create_user("alice")
            await amos.create_user("bob")
            await amos.create_cube("notes", owner="alice", cube_id="notes")
            ids = await amos.add(TURNS[:2], user_id="alice", cube_id="notes", session_id="s")
            hits = await amos.search("Porto", user_id="alice")
            assert {h.item.id for h in hits} == set(ids)
            item = await amos.update(ids[0], user_id="alice", text="Fact zero.")
            assert [v.item.text for v in await amos.history(ids[0], user_id="alice")][
                -1
            ] == item.text
            with pytest.raises(ValidationError):
                await amos.search("", user_id="alice")
            with pytest.raises(PermissionDenied):
                await amos.add("Not mine.", user_id="bob", cube_id="notes")
            results = await asyncio.gather(*(amos.get(i, user_id="alice") for i in ids))
            assert [r.id for r in results] == ids
        assert mos.get_user("alice").user_id == "alice"  # not owned: still open

    asyncio.run(scenario())


def test_the_pool_is_bounded(gated: tuple[MemoryOS, Gated]) -> None:
    """issue 27: at most ``threads`` calls run at once; the rest wait in the pool's queue."""
    memory, embedder = gated

    async def scenario() -> None:
        async with AsyncMemoryOS(memory, threads=2) as amos:
            embedder.hold()
            adds = [
                asyncio.ensure_future(amos.add(f"Turn {n}.", user_id="alice", cube_id="notes"))
                for n in range(6)
            ]
            while embedder.inside < 2:  # both threads are held at the gate
                await asyncio.to_thread(embedder.entered.wait, 60)
                embedder.entered.clear()
            embedder.release.set()
            assert len(await asyncio.gather(*adds)) == 6

    asyncio.run(scenario())
    assert embedder.most_inside == 2
    assert len(embedder.threads) == 2
    assert len(memory.list_memories("notes", user_id="alice")) == 6


def _turns_of(memory: MemoryOS, session_id: str) -> list[Any]:
    return memory.list_memories("notes", user_id="alice", filters={"session_id": session_id})


def _check_whole(memory: MemoryOS, session_id: str) -> None:
    """Every turn of ``session_id`` is there, each with its first version and create event."""
    items = _turns_of(memory, session_id)
    assert sorted(i.text for i in items) == sorted(t["content"] for t in TURNS)
    for item in items:
        assert len(memory.history(item.id, user_id="alice")) == 1
        events = memory.audit(by="alice", item_id=item.id)
        assert [e.op for e in events] == ["create"]
    assert {h.item.id for h in memory.search("Porto", user_id="alice", top_k=50)} >= {
        i.id for i in items
    }


def test_a_cancelled_add_mid_way_completes_whole_in_its_thread(
    gated: tuple[MemoryOS, Gated],
) -> None:
    """issue 27 (cancellation leaves nothing half-written): an ``add`` cancelled while its
    thread is embedding releases the caller at once; the store holds none of its turns until
    the thread's one transaction, then all of them, each complete."""
    memory, embedder = gated

    async def scenario() -> None:
        amos = AsyncMemoryOS(memory, threads=1)
        embedder.hold()
        add = asyncio.ensure_future(
            amos.add(TURNS, user_id="alice", cube_id="notes", session_id="mid")
        )
        await asyncio.to_thread(embedder.entered.wait, 60)
        add.cancel()
        with pytest.raises(asyncio.CancelledError):
            await add
        assert _turns_of(memory, "mid") == []  # nothing yet: the thread is held mid-way
        embedder.release.set()
        await amos.aclose()  # waits for the call still running in its thread

    asyncio.run(scenario())
    _check_whole(memory, "mid")


def test_a_cancelled_add_that_had_not_started_never_runs(gated: tuple[MemoryOS, Gated]) -> None:
    """issue 27 (cancellation leaves nothing half-written): an ``add`` cancelled while it waits
    for a thread never starts, so it writes nothing; the call ahead of it is whole."""
    memory, embedder = gated

    async def scenario() -> None:
        amos = AsyncMemoryOS(memory, threads=1)
        embedder.hold()
        first = asyncio.ensure_future(
            amos.add(TURNS, user_id="alice", cube_id="notes", session_id="first")
        )
        await asyncio.to_thread(embedder.entered.wait, 60)
        queued = asyncio.ensure_future(
            amos.add(TURNS, user_id="alice", cube_id="notes", session_id="queued")
        )
        await asyncio.sleep(0)  # let it reach the pool's queue
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        embedder.release.set()
        assert len(await first) == len(TURNS)
        await amos.aclose()

    asyncio.run(scenario())
    _check_whole(memory, "first")
    assert _turns_of(memory, "queued") == []


def test_open_runs_off_the_event_loop_and_owns_what_it_opened(e5: Embedder, database: str) -> None:
    """issue 27: ``AsyncMemoryOS.open`` takes ``MemoryOS.open``'s arguments, opens in another
    thread, and closes the MemoryOS on ``aclose``; after it, calls are refused."""
    embedder = Gated(e5)

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        async with AsyncMemoryOS.open(database, embedder=embedder, workers=0, threads=3) as amos:
            assert amos.settings.workers == 0
            await amos.create_user("alice")
            await amos.create_cube("notes", owner="alice", cube_id="notes")
            await amos.add("Ann lives in Porto.", user_id="alice", cube_id="notes")
            assert loop_thread not in embedder.threads
        assert amos.closed
        with pytest.raises(StorageError):
            await amos.get_user("alice")
        again = await AsyncMemoryOS.open(database, embedder=embedder)
        try:
            assert [c.cube_id for c in await again.list_cubes(user_id="alice")] == ["notes"]
        finally:
            await again.aclose()
            await again.aclose()  # idempotent

    asyncio.run(scenario())


def test_a_bad_pool_size_is_a_validation_error(mos: MemoryOS, tmp_path: Path) -> None:
    """issue 27: the pool's size is checked like every other bound, before anything opens."""
    for threads in (0, -1, True, 1.5, "4", MAX_ASYNC_THREADS + 1):
        with pytest.raises(ValidationError, match="threads"):
            AsyncMemoryOS(mos, threads=threads)
        with pytest.raises(ValidationError, match="threads"):
            AsyncMemoryOS.open(str(tmp_path / "never.db"), threads=threads)
    assert not (tmp_path / "never.db").exists()


def _sse(*pieces: str) -> Response:
    events = [
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) + "\n\n"
        for p in pieces
    ]
    return Response("".join(events) + "data: [DONE]\n\n", content_type="text/event-stream")


def test_chat_stream_is_an_async_iterator(httpserver: HTTPServer, db_path: Path) -> None:
    """issue 27: ``await amos.chat_stream(...)`` checks everything, then gives the pieces one by
    one from the pool; read to the end it stores the exchange, closed early it stores nothing."""
    httpserver.expect_request("/v1/chat/completions").respond_with_response(
        _sse("She lives ", "in Porto.")
    )
    memory = MemoryOS.open(
        str(db_path), workers=0, llm_provider="openai", llm_base_url=httpserver.url_for("/v1")
    )

    async def scenario() -> None:
        async with AsyncMemoryOS(memory, owns=True) as amos:
            await amos.create_user("alice")
            await amos.create_cube("notes", owner="alice", cube_id="notes")
            with pytest.raises(NotFoundError):
                await amos.chat_stream("Hi", user_id="alice", cube_id="elsewhere")
            pieces = await amos.chat_stream("Where?", user_id="alice", cube_id="notes",
                                            session_id="whole")  # fmt: skip
            assert isinstance(pieces, AsyncPieces)
            assert [p async for p in pieces] == ["She lives ", "in Porto."]
            assert len(_turns_of(amos.sync, "whole")) == 2
            early = await amos.chat_stream("Where?", user_id="alice", cube_id="notes",
                                           session_id="early")  # fmt: skip
            assert await early.__anext__() == "She lives "
            await early.aclose()
            assert _turns_of(amos.sync, "early") == []

    asyncio.run(scenario())


def test_chat_stream_without_a_model_raises_when_awaited(mos: MemoryOS) -> None:
    """issue 27: the async stream raises the core's error at ``await``, before any piece."""
    mos.create_user("alice")
    mos.create_cube("notes", owner="alice", cube_id="notes")

    async def scenario() -> None:
        async with AsyncMemoryOS(mos) as amos:
            with pytest.raises(LLMNotConfigured):
                await amos.chat_stream("Hi", user_id="alice", cube_id="notes")

    asyncio.run(scenario())


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 27: docs/async.md's Python example runs as written (in a fresh directory)."""
    page = (Path(__file__).parent.parent / "docs" / "async.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]  # the second is a client fragment
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/async.md", "exec"), {"__name__": "docs_example"})
    assert (tmp_path / "memory.db").exists()
