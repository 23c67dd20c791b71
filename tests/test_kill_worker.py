"""Crash safety of the scale-out queue: ``memstrata worker`` killed (SIGKILL) while it runs the
consolidation of an ingest, on PostgreSQL with the task queue on Redis.

The ingest goes through a ``MemoryOS`` that only queues (``workers=0, queue_only=True``), in
small batches into a cube whose working tier holds 4 turns per session, so consolidation tasks
flow all through it; a worker process runs them.  Each trial kills the worker when a random
number of batches has been acknowledged (plus a random fraction of a second, so it is inside a
task) and starts a new one.  At the end, with a worker alive:

* no acknowledged turn is lost (each id ``add`` returned is still there, its text unchanged);
* no task is lost: every task seen during the ingest is still in the queue, and each ends
  ``done`` (a task killed while running is claimed again once its lease of 2 s has run out;
  one killed in each of its attempts would end ``failed``, ``LeaseExpired``, and is counted);
* nothing is left outstanding and no working tier is over its capacity.

``MEMSTRATA_KILL_TRIALS`` (default 2) and ``MEMSTRATA_KILL_TURNS`` (default 80) size it (the
figures in docs/benchmarks.md name theirs).  Skipped without the test servers, failed in CI.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import MemoryOS
from tests.services import fresh_database, fresh_redis
from tests.serving import clean_env

TRIALS = int(os.environ.get("MEMSTRATA_KILL_TRIALS", "2"))
TURNS = int(os.environ.get("MEMSTRATA_KILL_TURNS", "80"))
BATCH = 4
CUBE = "kill"


@pytest.fixture
def places() -> Iterator[tuple[str, str]]:
    with fresh_database() as dsn, fresh_redis() as url:
        yield dsn, url


def start_worker(dsn: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "memstrata", "--db", dsn, "worker", "--threads", "1"],
            stdout=out, stderr=subprocess.STDOUT,
            env=clean_env(MEMSTRATA_REDIS_URL=url, MEMSTRATA_TASK_LEASE_S="2"),
        )  # fmt: skip


def test_killed_workers_lose_no_task_and_no_turn(places: tuple[str, str], tmp_path: Path) -> None:
    dsn, url = places
    rng = random.Random(int(os.environ.get("MEMSTRATA_KILL_SEED") or random.randrange(2**32)))
    turns = [f"Day {i}: I met friend {i % 13} at place {i % 29} about topic {i % 41}."
             for i in range(TURNS)]  # fmt: skip
    batches = [turns[i : i + BATCH] for i in range(0, TURNS, BATCH)]
    acked: dict[str, str] = {}
    seen: set[str] = set()
    log = tmp_path / "workers.log"
    with MemoryOS.open(dsn, workers=0, queue_only=True, redis_url=url, task_lease_s=2) as m:
        m.create_user("ann")
        m.create_cube("kill", owner="ann", cube_id=CUBE, settings={"working_capacity": 4})
        worker = start_worker(dsn, url, log)
        kills = sorted(rng.sample(range(1, len(batches)), min(TRIALS, len(batches) - 1)))
        try:
            for number, batch in enumerate(batches):
                messages = [{"role": "user", "name": "Ann", "content": t} for t in batch]
                ids = m.add(messages, user_id="ann", cube_id=CUBE, session_id=f"s{number % 3}")
                acked.update(zip(ids, batch, strict=True))
                seen.update(t.task_id for t in m.scheduler.queue.tasks(CUBE, limit=1000))
                if number in kills:
                    time.sleep(rng.uniform(0.0, 0.5))
                    worker.send_signal(signal.SIGKILL)
                    worker.wait()
                    worker = start_worker(dsn, url, log)
            assert m.wait(CUBE, timeout=300, user_id="ann"), log.read_text(errors="replace")
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0, log.read_text(errors="replace")
        queue = m.scheduler.queue
        final = {t.task_id: t for t in queue.tasks(CUBE, limit=10_000)}
        assert final and seen <= set(final), "a task seen during the ingest is gone"
        failed = [t for t in final.values() if t.status != "done"]
        assert all(t.status == "failed" and "LeaseExpired" in (t.error or "") for t in failed)
        assert queue.outstanding(CUBE) == 0
        stored = {i.id: i.text for i in m.store.get_items(list(acked), [CUBE])}
        assert stored == acked  # every acknowledged turn, unchanged
        working = m.list_memories(CUBE, user_id="ann", filters={"tier": "working"}, limit=1000)
        per_session: dict[str | None, int] = {}
        for item in working:
            per_session[item.session_id] = per_session.get(item.session_id, 0) + 1
        assert max(per_session.values(), default=0) <= 4
