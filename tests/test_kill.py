"""Crash safety: ``memstrata serve`` killed (SIGKILL) at random points of an ingest over HTTP.

Clients in threads add turns in small batches, each turn with its own external id; the server
is killed when a random number of batches has been acknowledged (plus a random fraction of a
second, so requests are in flight), then restarted, and the clients resend what was not
acknowledged (an external id already stored is not stored twice).  After each kill:

* no acknowledged turn is lost (every 2xx-acknowledged external id is in the database);
* no task is lost (every task seen before is still there; each is pending, running, done or
  failed);
* ``PRAGMA integrity_check`` is ``ok``.

At the end the ingest is finished on a clean server, stopped with SIGTERM, and the database is
reopened with a worker: every task finishes (those killed while running included, once their
lease has expired; one killed in each of its attempts ends ``failed``, ``LeaseExpired``), no
working tier is left over capacity, and each turn is stored once.

``MEMSTRATA_KILL_TRIALS`` (default 3) and ``MEMSTRATA_KILL_TURNS`` (default 120) size it; the
full form is ``MEMSTRATA_KILL_TRIALS=10 MEMSTRATA_KILL_TURNS=2000`` (see docs/benchmarks.md).
``MEMSTRATA_KILL_SEED`` repeats a run's random points (timing still varies).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memstrata import MemoryOS
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue
from tests.serving import Served, served

TRIALS = int(os.environ.get("MEMSTRATA_KILL_TRIALS", "3"))
TURNS = int(os.environ.get("MEMSTRATA_KILL_TURNS", "120"))
SEED = int(os.environ.get("MEMSTRATA_KILL_SEED") or random.randrange(2**32))
CLIENTS = 3
BATCH = 4
CAPACITY = 4  # working turns per session: consolidation runs all through the ingest
LEASE_S = "2"  # killed running tasks are claimable again 2 s after the kill
CUBE = "kill"


@dataclass
class Ingest:
    """The turns still to send, in batches, and the external ids the server acknowledged."""

    todo: deque[list[dict[str, str]]]
    acked: set[str] = field(default_factory=set)
    answers: list[str] = field(default_factory=list)  # non-2xx answers: there should be none
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> list[dict[str, str]] | None:
        with self.lock:
            return self.todo.popleft() if self.todo else None

    def give_back(self, batch: list[dict[str, str]]) -> None:
        with self.lock:
            self.todo.appendleft(batch)

    def done(self, batch: list[dict[str, str]]) -> None:
        with self.lock:
            self.acked.update(turn["id"] for turn in batch)

    def acknowledged(self) -> int:
        with self.lock:
            return len(self.acked)


def turns(n: int) -> Ingest:
    made = [
        {"id": f"turn-{i:05d}", "role": "user", "content": f"Day {i}: I met friend {i % 13} at "
         f"place {i % 29} and we talked about topic {i % 41}."}
        for i in range(n)
    ]  # fmt: skip
    return Ingest(deque(made[i : i + BATCH] for i in range(0, n, BATCH)))


def client(server: Served, ingest: Ingest, number: int, stop: threading.Event) -> None:
    """Send batches until none is left, the server is gone, or ``stop``."""
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as http:
        while not stop.is_set() and (batch := ingest.take()) is not None:
            body = {"cube_id": CUBE, "messages": batch, "session_id": f"client-{number}"}
            try:
                answer = http.post("/memories", json=body)
            except httpx.TransportError:  # killed mid-request: not acknowledged
                ingest.give_back(batch)
                return
            if answer.status_code == 200 and len(answer.json()["ids"]) == len(batch):
                ingest.done(batch)
            else:
                ingest.answers.append(f"{answer.status_code} {answer.text[:200]}")
                ingest.give_back(batch)
                return


def run_clients(server: Served, ingest: Ingest, stop: threading.Event) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=client, args=(server, ingest, n, stop)) for n in range(CLIENTS)
    ]
    for thread in threads:
        thread.start()
    return threads


def kill_during_ingest(server: Served, ingest: Ingest, rng: random.Random, trial: int) -> None:
    """Start the clients; SIGKILL the server once a random share of what is left is acked."""
    left = len(ingest.todo)
    target = ingest.acknowledged() + BATCH * rng.randint(1, max(1, left // (TRIALS - trial + 1)))
    stop = threading.Event()
    threads = run_clients(server, ingest, stop)
    deadline = time.monotonic() + 120
    while ingest.acknowledged() < target and time.monotonic() < deadline and ingest.todo:
        time.sleep(0.01)
    time.sleep(rng.uniform(0, 0.4))  # so the kill falls inside requests, not between them
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    stop.set()
    for thread in threads:
        thread.join(60)


@dataclass
class State:
    """What a check read from the database."""

    tasks: dict[str, str]  # task id → status
    external_ids: list[str]


def check(db: Path, ingest: Ingest, seen: dict[str, str], note: str) -> State:
    """The crash-safety promises, read from the file with the server gone."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], note
        tasks = dict(conn.execute("SELECT task_id, status FROM tasks").fetchall())
        external = [row[0] for row in conn.execute(
            "SELECT external_id FROM items WHERE cube_id = ? AND external_id IS NOT NULL", (CUBE,)
        )]  # fmt: skip
    finally:
        conn.close()
    lost_turns = ingest.acked - set(external)
    assert not lost_turns, f"{note}: {len(lost_turns)} acknowledged turns lost"
    lost_tasks = set(seen) - set(tasks)
    assert not lost_tasks, f"{note}: {len(lost_tasks)} tasks lost"
    assert set(tasks.values()) <= {"pending", "running", "done", "failed"}, note
    return State(tasks, external)


def test_sigkill_during_an_ingest_loses_no_acknowledged_turn_and_no_task(tmp_path: Path) -> None:
    db, log = tmp_path / "kill.db", tmp_path / "server.log"
    rng = random.Random(SEED)
    ingest = turns(TURNS)
    seen: dict[str, str] = {}
    interrupted: set[str] = set()  # tasks that were running when the server was killed
    for trial in range(TRIALS):
        with served(db, log, MEMSTRATA_TASK_LEASE_S=LEASE_S) as server:
            if trial == 0:
                cube = {"name": CUBE, "cube_id": CUBE, "settings": {"working_capacity": CAPACITY}}
                httpx.post(f"{server.url}/mem_cubes", json=cube, headers=server.headers)
            kill_during_ingest(server, ingest, rng, trial)
        state = check(db, ingest, seen, f"seed {SEED}, after kill {trial + 1}")
        seen = state.tasks
        interrupted |= {t for t, status in state.tasks.items() if status == "running"}
    with served(db, log, MEMSTRATA_TASK_LEASE_S=LEASE_S) as server:  # finish the ingest cleanly
        for thread in run_clients(server, ingest, threading.Event()):
            thread.join(600)
        assert server.stop(signal.SIGTERM, 15) == 0
    assert not ingest.todo and ingest.answers == [], ingest.answers[:3]
    state = check(db, ingest, seen, f"seed {SEED}, after the clean stop")
    assert len(state.external_ids) == len(set(state.external_ids)) == TURNS  # each stored once
    with MemoryOS.open(str(db), workers=1, task_lease_s=float(LEASE_S)) as memory:
        assert memory.wait(timeout=300)  # the tasks resume, the interrupted ones included
    check(db, ingest, seen, f"seed {SEED}, after resuming")
    store = SQLiteStore(db)
    try:
        tasks = SQLiteTaskQueue(store).tasks(limit=100_000)
    finally:
        store.close()
    assert {t.status for t in tasks} <= {"done", "failed"}, [(t.kind, t.status) for t in tasks]
    assert interrupted <= {t.task_id for t in tasks}
    # A task fails only by running out of attempts to kills: each kill costs the attempt under
    # way (the queue cannot tell a kill from a task that crashes its worker), so with many kills
    # a long task can be cut short max_attempts times.
    failed = [t for t in tasks if t.status == "failed"]
    assert all(t.task_id in interrupted and t.attempts == t.max_attempts for t in failed)
    assert all((t.error or "").startswith("LeaseExpired") for t in failed)
    conn = sqlite3.connect(db)
    try:
        working = conn.execute(
            "SELECT session_id, count(*) FROM items WHERE cube_id = ? AND tier = 'working' "
            "GROUP BY session_id",
            (CUBE,),
        ).fetchall()
    finally:
        conn.close()
    assert all(count <= CAPACITY for _, count in working), working  # consolidation caught up
    print(
        f"seed {SEED}: {TRIALS} kills, {len(ingest.acked)} turns acknowledged, 0 lost; "
        f"{len(tasks)} tasks, 0 lost; {len(interrupted)} interrupted while running, "
        f"{len(failed)} of them failed after {tasks[0].max_attempts} kills"
    )
