"""The REST server under test: the real app, served by uvicorn on a free loopback port.

One server (and one database, with the e5 embedder and a background worker) serves the whole
session; each test makes its own users and cubes (``new_user``), so tests do not see each other's
data.  Its ``max_request_bytes`` is small so that the size limit is cheap to test.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest
import uvicorn
from fastapi import FastAPI

from memstrata import MemoryOS
from memstrata.server.rest import bootstrap, create_app
from tests.services import fresh_database

MAX_REQUEST_BYTES = 64_000
BOOM = "/test-only/boom"


class Boom(RuntimeError):
    """What the test-only route raises: an exception no handler knows."""


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Run ``app`` with uvicorn in a thread on a free 127.0.0.1 port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@dataclass
class Server:
    """A running server: its URL, the ``MemoryOS`` behind it, and the admin's key."""

    url: str
    memory: MemoryOS
    admin_key: str
    #: a route, outside the OpenAPI description, that raises an exception no handler knows
    boom_path: str = BOOM
    _clients: list[httpx.Client] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def client(self, key: str | None = None) -> httpx.Client:
        """An HTTP client for the server, sending ``key`` as the bearer key when given."""
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=60)
        self._clients.append(client)
        return client

    def unique(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def close(self) -> None:
        for client in self._clients:
            client.close()


@dataclass(frozen=True)
class Account:
    """A user made through the API, with a client that sends its key."""

    user_id: str
    key: str
    http: httpx.Client


def _boom() -> None:
    raise Boom("a bug nobody handled")


@pytest.fixture(scope="session")
def start_server() -> Callable[[FastAPI], AbstractContextManager[str]]:
    """``serving``, for test modules that run an app of their own."""
    return serving


@contextmanager
def fuzz_target(folder: Path, **settings: Any) -> Iterator[tuple[str, str]]:
    """A server of its own for generated requests (fuzz and schema tests): a database in
    ``folder`` opened with ``settings``, an admin key, and a cube ``notes`` with one memory for
    the requests to find.  Yields (base URL, admin key)."""
    with MemoryOS.open(str(folder / "fuzzed.db"), workers=0, **settings) as memory:
        key = bootstrap(memory)
        assert key is not None
        memory.create_cube("notes", owner="admin", cube_id="notes")
        memory.add("Ann moved to Porto.", user_id="admin", cube_id="notes")
        with serving(create_app(memory)) as url:
            yield url, key


def generated(examples: int) -> hypothesis.settings:
    """Hypothesis settings for generated requests: ``examples`` per operation, the same ones on
    every run, no deadline (a request may wait for the embedder), no health checks."""
    return hypothesis.settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The REST server, once per engine (PostgreSQL: skipped, or failed in CI, without a test
    server)."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            db = str(Path(tmp_path_factory.mktemp("rest")) / "server.db")
        else:
            db = stack.enter_context(fresh_database())
        yield stack.enter_context(_serve(db))


@contextmanager
def _serve(db: str) -> Iterator[Server]:
    with MemoryOS.open(db, workers=1, max_request_bytes=MAX_REQUEST_BYTES) as memory:
        key = bootstrap(memory)
        assert key is not None
        app = create_app(memory)
        app.add_api_route(BOOM, _boom, include_in_schema=False)
        with serving(app) as url:
            running = Server(url, memory, key)
            yield running
            running.close()


@pytest.fixture(scope="session")
def admin(server: Server) -> httpx.Client:
    """A client with the bootstrap admin's key."""
    return server.client(server.admin_key)


@pytest.fixture
def new_user(server: Server, admin: httpx.Client) -> Callable[..., Account]:
    """Make a user (role ``user`` unless told) and a key for it, through the API."""

    def make(prefix: str = "user", role: str = "user") -> Account:
        user_id = server.unique(prefix)
        created = admin.post("/users", json={"user_id": user_id, "role": role})
        assert created.status_code == 201, created.text
        made = admin.post(f"/users/{user_id}/keys", json={"label": "test"})
        assert made.status_code == 201, made.text
        key = made.json()["key"]
        return Account(user_id, key, server.client(key))

    return make


@pytest.fixture
def owner_cube(new_user: Callable[..., Account]) -> tuple[Account, str]:
    """A user owning a new cube that holds two turns."""
    owner = new_user("owner")
    cube = owner.http.post("/mem_cubes", json={"name": "notes"})
    assert cube.status_code == 201, cube.text
    cube_id = cube.json()["cube_id"]
    messages = [
        {"role": "user", "name": "Ann", "content": "I moved to Porto last spring."},
        {"role": "user", "name": "Ann", "content": "My cat is called Miso."},
    ]
    added = owner.http.post("/memories", json={"cube_id": cube_id, "messages": messages})
    assert added.status_code == 200, added.text
    return owner, cube_id
