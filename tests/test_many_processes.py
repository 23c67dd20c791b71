"""Many processes, one memory (issue 12): two ``memstrata serve --workers 0`` and two
``memstrata worker`` on one PostgreSQL database with the task queue on Redis.

A client writing through one server reads its write through the other at once, and sees every
later change made through the first (update, delete, erase, runtime settings) with nothing
stale; the background work its adds queue is done by the worker processes, not the servers.

Skipped without the test servers, failed in CI (``tests/services.py``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.services import fresh_database, fresh_redis
from tests.serving import Served, clean_env, served


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Served, Served, list[subprocess.Popen[bytes]]]]:
    with ExitStack() as stack:
        dsn = stack.enter_context(fresh_database())
        env = {"MEMSTRATA_REDIS_URL": stack.enter_context(fresh_redis())}
        first = stack.enter_context(served(dsn, tmp_path / "a.log", "--workers", "0", **env))
        second = stack.enter_context(served(dsn, tmp_path / "b.log", "--workers", "0", **env))
        workers = []
        for n in range(2):
            log = (tmp_path / f"worker{n}.log").open("ab")
            stack.callback(log.close)
            worker = subprocess.Popen(
                [sys.executable, "-m", "memstrata", "--db", dsn, "worker", "--threads", "1"],
                stdout=log, stderr=subprocess.STDOUT, env=clean_env(**env),
            )  # fmt: skip
            stack.callback(worker.kill)
            workers.append(worker)
        yield first, second, workers
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0


def texts(server: Served, key: str, query: str) -> list[str]:
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        found = http.post(f"{server.url}/search", json={"query": query, "top_k": 5})
    assert found.status_code == 200, found.text
    return [hit["text"] for hit in found.json()["hits"]]


def test_two_servers_and_two_workers_share_one_memory(
    cluster: tuple[Served, Served, list[subprocess.Popen[bytes]]],
) -> None:
    a, b, _ = cluster
    with ExitStack() as clients:
        share_one_memory(a, b, clients)


def share_one_memory(a: Served, b: Served, clients: ExitStack) -> None:
    def client(server: Served, key: str | None = None) -> httpx.Client:
        headers = server.headers if key is None else {"Authorization": f"Bearer {key}"}
        return clients.enter_context(httpx.Client(base_url=server.url, headers=headers,
                                                  timeout=60))  # fmt: skip

    admin, admin_b = client(a), client(b)
    assert admin.post("/users", json={"user_id": "ann"}).status_code == 201
    key = admin.post("/users/ann/keys", json={}).json()["key"]
    ann_a, ann_b = client(a, key), client(b, key)
    cube = ann_a.post("/mem_cubes", json={"name": "notes"}).json()["cube_id"]
    said = {"role": "user", "name": "Ann", "content": "My bike is a green Gazelle from 1987."}
    (item_id,) = ann_a.post("/memories", json={"cube_id": cube, "messages": [said]}).json()["ids"]
    assert said["content"] in texts(b, key, "What bike does Ann ride?")  # read-your-writes

    changed = ann_a.put(f"/memories/{cube}/{item_id}", json={"text": "My bike is a red Batavus."})
    assert changed.status_code == 200, changed.text
    assert ann_b.get(f"/memories/{cube}/{item_id}").json()["text"] == "My bike is a red Batavus."
    assert texts(b, key, "Batavus bike")[:1] == ["My bike is a red Batavus."]
    assert not [t for t in texts(b, key, "Gazelle bike") if "Gazelle" in t]

    # The adds queued consolidation; the servers only queue, the workers run it.
    waited = ann_b.post("/tasks/wait", json={"cube_id": cube, "timeout_s": 60})
    assert waited.status_code == 200 and waited.json()["done"] is True
    done = ann_b.get("/tasks", params={"cube_id": cube, "status": "done"}).json()
    assert done and {t["kind"] for t in done} >= {"consolidate"}

    assert admin.post("/configure", json={"rrf_k": 33}).status_code == 200
    assert admin_b.post("/configure", json={}).json()["rrf_k"] == 33

    assert ann_a.delete(f"/memories/{cube}/{item_id}").status_code in (200, 204)
    assert "My bike is a red Batavus." not in texts(b, key, "Batavus bike")
    erased = ann_a.post("/erase", json={"item_id": item_id})
    assert erased.status_code == 200 and erased.json()["erased"] == 1
    assert ann_b.get(f"/memories/{cube}/{item_id}").json()["text"] == ""
