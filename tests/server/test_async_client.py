"""``memstrata.client.AsyncClient`` against the real server (uvicorn on a loopback port, both
engines): the same methods as ``Client``, the same requests on the wire, the same answers and
errors, on ``httpx.AsyncClient``.  The chat model is a fake OpenAI-compatible API at the HTTP
transport."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from fastapi import FastAPI
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS
from memstrata.client import AsyncClient, Client, ServerUnreachable
from memstrata.errors import (
    ConflictError,
    LLMError,
    MemCubeError,
    NotFoundError,
    PermissionDenied,
    Unauthenticated,
    ValidationError,
)
from memstrata.model import Cube, Hit, MemoryItem
from memstrata.server.rest import bootstrap, create_app

if TYPE_CHECKING:
    from tests.server.conftest import Account, Server

T = TypeVar("T")
MESSAGES = [
    {"role": "user", "name": "Ann", "content": "I moved to Porto last spring."},
    {"role": "user", "name": "Ann", "content": "My cat is called Miso."},
]
#: Client's calls whose async form has another name (asyncio's convention).
RENAMED = {"close": "aclose"}


def _run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def _public(cls: type) -> list[str]:
    return [name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))]


def _signature(call: Any) -> list[tuple[str, Any, Any, Any]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(call).parameters.values()
    ]


def test_the_async_client_has_the_same_methods_and_signatures() -> None:
    """issue 27: a method of Client with no async form, or with another signature (parameter by
    parameter, result type included), fails here."""
    mine, theirs = _public(AsyncClient), _public(Client)
    assert sorted(RENAMED.get(n, n) for n in theirs) == sorted(mine)
    for name in theirs:
        sync, coroutine = getattr(Client, name), getattr(AsyncClient, RENAMED.get(name, name))
        assert inspect.iscoroutinefunction(coroutine), name
        assert not inspect.iscoroutinefunction(sync), name
        assert _signature(coroutine) == _signature(sync), name
        assert (
            inspect.signature(coroutine).return_annotation
            == inspect.signature(sync).return_annotation
        ), name
    assert inspect.signature(Client.search).return_annotation == "list[Hit]"
    assert AsyncClient.search.__doc__ == Client.search.__doc__


def test_both_clients_send_the_same_requests(httpserver: HTTPServer) -> None:
    """issue 27 (request building shared): the same calls put the same requests on the wire."""
    httpserver.expect_request("/search").respond_with_json({"hits": []})
    httpserver.expect_request("/memories").respond_with_json({"ids": ["a"]})
    httpserver.expect_request("/memories/c1").respond_with_json([])
    httpserver.expect_request("/mem_cubes/c1/share/bob", method="DELETE").respond_with_data(
        status=204
    )

    def calls(client: Any) -> list[Any]:
        return [
            client.search("Porto?", cube_ids=["c1"], top_k=3, as_of="2026-01-01T00:00:00"),
            client.add(MESSAGES, cube_id="c1", session_id="s"),
            client.add_document(b"Ann lives in Porto.", filename="a.txt", cube_id="c1"),
            client.list_memories("c1", filters={"tier": ["mid", "long"]}, limit=5),
            client.revoke("c1", "bob"),
        ]

    with Client(httpserver.url_for(""), "ms_key") as sync:
        answers = calls(sync)
    sent = [_request(r) for r, _ in httpserver.log]
    httpserver.clear_log()

    async def scenario() -> list[Any]:
        async with AsyncClient(httpserver.url_for(""), "ms_key") as client:
            return list(await asyncio.gather(*calls(client)))

    assert _run(scenario) == answers
    assert sorted(map(repr, (_request(r) for r, _ in httpserver.log))) == sorted(map(repr, sent))


def _request(request: Request) -> tuple[str, str, str, str | None, bytes]:
    """What a request put on the wire, less the multipart boundary."""
    body = request.get_data()
    kind = request.content_type
    if kind and kind.startswith("multipart/form-data"):
        boundary = kind.split("boundary=")[1].encode()
        body, kind = body.replace(boundary, b"B"), "multipart/form-data"
    return (
        request.method,
        request.path,
        request.query_string.decode(),
        request.headers.get("Authorization"),
        body
        if kind != "application/json"
        else json.dumps(json.loads(body), sort_keys=True).encode(),
    )


@pytest.fixture
def account(new_user: Callable[..., Account]) -> Account:
    return new_user("async")


def test_the_calls_answer_with_the_cores_types(server: Server, account: Account) -> None:
    """issue 27: users, cubes, items, search, context, history, tasks over AsyncClient."""
    cube_id = f"notes-{account.user_id}"

    async def scenario() -> None:
        async with AsyncClient(server.url, account.key) as client:
            assert (await client.me()).user_id == account.user_id
            assert (await client.health())["status"] == "ok"
            cube = await client.create_cube("notes", cube_id=cube_id)
            assert isinstance(cube, Cube)
            ids = await client.add(MESSAGES, cube_id=cube_id, session_id="s1")
            assert len(ids) == 2
            item = await client.get(ids[0], cube_id=cube_id)
            assert isinstance(item, MemoryItem) and item.text == MESSAGES[0]["content"]
            hits = await client.search("Where does Ann live?", cube_ids=[cube_id])
            assert all(isinstance(h, Hit) for h in hits) and ids[0] in [h.item.id for h in hits]
            context = await client.context("Where does Ann live?", cube_ids=[cube_id])
            assert "Porto" in context.text
            changed = await client.update(ids[1], cube_id=cube_id, text="My cat is Mochi.")
            versions = await client.history(ids[1], cube_id=cube_id)
            assert [v.item.text for v in versions][-1] == changed.text
            assert (await client.delete(ids[1], cube_id=cube_id)).status == "deleted"
            listed = await client.list_memories(cube_id, filters={"session_id": "s1"})
            assert [i.id for i in listed] == [ids[0]]
            assert await client.wait(cube_id, timeout=30) is True
            assert all(t.cube_id == cube_id for t in await client.tasks(cube_id=cube_id))
            assert "memstrata" in await client.metrics()
            key = await client.create_key(label="second")
            assert key.secret and key.key_id in [k.key_id for k in await client.list_keys()]
            await client.revoke_key("me", key.key_id)

    _run(scenario)


def test_error_responses_raise_the_in_process_classes(
    server: Server, account: Account, new_user: Callable[..., Account]
) -> None:
    """issue 27 (error mapping shared): each error response is the core's class, as Client's."""
    other = new_user("other")

    async def scenario() -> None:
        async with (
            AsyncClient(server.url, account.key) as client,
            AsyncClient(server.url, other.key) as stranger,
            AsyncClient(server.url, None) as anonymous,
        ):
            cube = await client.create_cube("notes")
            with pytest.raises(ConflictError):
                await client.create_cube("again", cube_id=cube.cube_id)
            with pytest.raises(PermissionDenied):
                await stranger.add("Not mine.", cube_id=cube.cube_id)
            with pytest.raises(NotFoundError):
                await client.get("01J0000000000000000000NONE", cube_id=cube.cube_id)
            with pytest.raises(ValidationError):
                await client.search("", cube_ids=[cube.cube_id])
            with pytest.raises(ValidationError, match="cannot send as JSON"):
                await client.add([{"content": "x", "metadata": {"n": float("nan")}}],
                                 cube_id=cube.cube_id)  # fmt: skip
            with pytest.raises(Unauthenticated):
                await anonymous.list_cubes()

    _run(scenario)


def test_export_then_import_over_the_async_client(
    server: Server, account: Account, new_user: Callable[..., Account], tmp_path: Path
) -> None:
    """issue 27: a MemCube streamed to a file and uploaded from one, as ``Client`` does; a
    refused download leaves no file."""
    bob = new_user("bob")

    async def scenario() -> None:
        async with (
            AsyncClient(server.url, account.key) as client,
            AsyncClient(server.url, bob.key) as theirs,
        ):
            cube = await client.create_cube("notes")
            await client.add(MESSAGES, cube_id=cube.cube_id)
            archive = await client.export(cube.cube_id, tmp_path / "notes.tar.gz")
            assert archive.read_bytes()[:2] == b"\x1f\x8b"
            with pytest.raises(MemCubeError, match="exists"):
                await client.export(cube.cube_id, archive)
            copy = await theirs.import_cube(archive, cube_id=f"{bob.user_id}-copy", keep_ids=False)
            assert copy.owner == bob.user_id
            texts = [i.text for i in await theirs.list_memories(copy.cube_id)]
            assert texts == [m["content"] for m in MESSAGES]
            with pytest.raises(PermissionDenied):
                await theirs.export(cube.cube_id, tmp_path / "not-mine.tar.gz")
            assert not (tmp_path / "not-mine.tar.gz").exists()

    _run(scenario)


def _completions(request: Request) -> Response:
    """A stand-in OpenAI-compatible chat model: two pieces, or one and then a broken chunk."""
    question = request.get_json()["messages"][-1]["content"]
    chunks = [f"data: {json.dumps({'choices': [{'delta': {'content': 'You live '}}]})}\n\n"]
    chunks.append("data: {broken\n\n" if "break" in question else "")
    chunks.append(f"data: {json.dumps({'choices': [{'delta': {'content': 'in Porto.'}}]})}\n\n")
    return Response("".join(chunks) + "data: [DONE]\n\n", content_type="text/event-stream")


@pytest.fixture
def chatty(
    httpserver: HTTPServer,
    tmp_path: Path,
    start_server: Callable[[FastAPI], AbstractContextManager[str]],
) -> Iterator[tuple[str, str]]:
    """A server whose MemoryOS has the stand-in chat model, with cube ``notes``: (URL, key)."""
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(
        _completions
    )
    with MemoryOS.open(
        str(tmp_path / "chat.db"),
        workers=0,
        llm_provider="openai",
        llm_base_url=httpserver.url_for("/v1"),
    ) as memory:
        key = bootstrap(memory)
        assert key is not None
        memory.create_cube("notes", owner="admin", cube_id="notes")
        memory.add("I moved to Porto last spring.", user_id="admin", cube_id="notes")
        with start_server(create_app(memory)) as url:
            yield url, key


def test_chat_stream_is_an_async_iterator(chatty: tuple[str, str]) -> None:
    """issue 27: ``await client.chat_stream(...)`` sends the request and raises its errors; its
    pieces are read with ``async for``; a failure inside the stream is raised by the iterator;
    closed early, nothing is stored."""
    url, key = chatty

    async def scenario() -> None:
        async with AsyncClient(url, key) as client:
            pieces = await client.chat_stream("Where do I live?", cube_id="notes", session_id="c2")
            assert [p async for p in pieces] == ["You live ", "in Porto."]
            stored = await client.list_memories("notes", filters={"session_id": "c2"})
            assert [i.text for i in stored] == ["Where do I live?", "You live in Porto."]
            broken = await client.chat_stream("please break", cube_id="notes", session_id="c3")
            assert await broken.__anext__() == "You live "
            with pytest.raises(LLMError, match="not a chat chunk"):
                await broken.__anext__()
            early = await client.chat_stream("Where do I live?", cube_id="notes", session_id="c4")
            assert await early.__anext__() == "You live "
            await early.aclose()
            for session in ("c3", "c4"):
                assert await client.list_memories("notes", filters={"session_id": session}) == []
            with pytest.raises(NotFoundError):
                await client.chat_stream("Hi", cube_id="elsewhere")

    _run(scenario)


def test_no_server_is_server_unreachable() -> None:
    """issue 27: a refused connection is ``ServerUnreachable`` (503), as with ``Client``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def scenario() -> None:
        async with AsyncClient(f"http://127.0.0.1:{port}", "ms_key", timeout=5) as client:
            with pytest.raises(ServerUnreachable, match="is the server running") as raised:
                await client.health()
            assert raised.value.status == 503

    _run(scenario)
