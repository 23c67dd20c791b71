"""Findings 5 and 7 of issue 24 (the outside attack on the service): the task queue and ``/tasks``.

Finding 5: one bad task stopped the whole queue.  A ``max_attempts`` that is not a number on one
Redis task hash (written by someone with access to Redis, or by a bug) made the claim script fail
on every call: no background work for any cube, and a worker log growing by a traceback every
poll.  A task whose payload could not be read (not JSON, not an object) made every claim raise on
the SQL queues too, and ``GET /tasks`` answer 500 for everyone.  Now a claim quarantines what it
cannot read (``failed``, ``"Quarantined: <what is wrong>"``) and goes on, and a listing shows such
a record as that failed task.

Finding 7: ``/tasks`` took the newest 100 tasks of all users and then kept the caller's: after
another user made 110 tasks, Bob saw none of his 13.  Now the queue lists the caller's cubes only,
so the limit counts their tasks alone.

Every replay runs on the three queues: SQLite's, PostgreSQL's and Redis's.  The poison is written
straight into the queue's storage, as the attacker did.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memstrata import MemoryOS
from memstrata.scheduler import Scheduler, Task, TaskQueue
from memstrata.server.rest import bootstrap, create_app
from memstrata.store.redis import RedisTaskQueue
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue
from tests.server.conftest import serving
from tests.services import fresh_database, fresh_redis

pytestmark = pytest.mark.engines("sqlite", "postgres")

QUEUES = ["sqlite", "postgres", "redis"]
PREFIX = "memstrata"


@dataclass
class Poison:
    """Writes into a queue's storage behind its back: the SQLite file, the PostgreSQL database
    or the Redis server at ``where``."""

    where: str

    @property
    def redis(self) -> bool:
        return self.where.startswith("redis://")

    def set(self, task_id: str, name: str, value: str) -> None:
        """Overwrite one stored field of a task."""
        if self.redis:
            self._redis(lambda r: r.hset(f"{PREFIX}:task:{task_id}", name, value))
        else:
            self._sql(f"UPDATE tasks SET {name} = %s WHERE task_id = %s", (value, task_id))

    def expire(self, task_id: str) -> None:
        """Make a running task's lease look long expired (its worker died)."""
        if self.redis:
            self._redis(lambda r: r.zadd(f"{PREFIX}:leases", {task_id: 0}))
            self._redis(lambda r: r.hset(f"{PREFIX}:task:{task_id}", "lease_until", "0"))
        else:
            self._sql("UPDATE tasks SET lease_until = 0 WHERE task_id = %s", (task_id,))

    def not_a_hash(self, task_id: str) -> None:
        """Replace a task's Redis hash by a string key."""
        key = f"{PREFIX}:task:{task_id}"
        self._redis(lambda r: r.delete(key))
        self._redis(lambda r: r.set(key, "gone"))

    def _redis(self, write: object) -> None:
        import redis

        with redis.Redis.from_url(self.where, decode_responses=True) as client:
            write(client)  # type: ignore[operator]

    def _sql(self, sql: str, params: tuple[str, ...]) -> None:
        if self.where.startswith("postgresql://"):
            import psycopg

            with psycopg.connect(self.where) as pg:
                pg.execute(sql, params)  # type: ignore[arg-type]
            return
        conn = sqlite3.connect(self.where)
        try:
            with conn:
                conn.execute(sql.replace("%s", "?"), params)
        finally:
            conn.close()


@pytest.fixture(params=QUEUES)
def queue_poison(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[TaskQueue, Poison]]:
    """A queue of each kind, and a way to poison its storage."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            db = tmp_path / "tasks.db"
            store = SQLiteStore(db)
            stack.callback(store.close)
            yield SQLiteTaskQueue(store), Poison(str(db))
        elif request.param == "postgres":
            from memstrata.store.postgres import PostgresStore, PostgresTaskQueue

            dsn = stack.enter_context(fresh_database())
            pg = PostgresStore(dsn)
            stack.callback(pg.close)
            yield PostgresTaskQueue(pg), Poison(dsn)
        else:
            url = stack.enter_context(fresh_redis())
            yield stack.enter_context(RedisTaskQueue(url, prefix=PREFIX)), Poison(url)


def kind_of(queue: TaskQueue) -> str:
    if isinstance(queue, RedisTaskQueue):
        return "redis"
    return "sqlite" if isinstance(queue, SQLiteTaskQueue) else "postgres"


#: What the attacker wrote, by queue: (field, value).  PostgreSQL's columns are typed, so only
#: the text columns can hold garbage there; SQLite's accept any value; Redis's are all strings.
POISONS = {
    "payload not JSON": ("payload", "{not json", QUEUES),
    "payload a JSON list": ("payload", "[1, 2]", QUEUES),
    "payload nested too deep": ("payload", "[" * 50_000 + "]" * 50_000, QUEUES),
    "max_attempts not a number": ("max_attempts", "lots", ["sqlite", "redis"]),
    "attempts not an integer": ("attempts", "1.5", ["sqlite", "redis"]),
    "created_at not a time": ("created_at", "yesterday", ["sqlite", "redis"]),
    "status unknown": ("status", "bogus", ["redis"]),
    "task_id not its key's": ("task_id", "someone-else", ["redis"]),
}


def poisoned(queue: TaskQueue, poison: Poison, case: str, state: str) -> str:
    """Submit a task, put it in ``state`` (``pending``, or ``expired``: claimed by a worker that
    died), poison it with ``case``; its id."""
    name, value, _ = POISONS[case]
    bad = queue.submit("work", {"n": 0}, cube_id="c1")
    if state == "expired":
        claimed = queue.claim(30)
        assert claimed is not None and claimed.task_id == bad
        poison.expire(bad)
    poison.set(bad, name, value)
    return bad


def run_all(queue: TaskQueue) -> list[int]:
    """Run every due task with a real scheduler (inline); the payloads' ``n`` it ran."""
    ran: list[int] = []
    scheduler = Scheduler(queue, workers=0)
    scheduler.register("work", lambda task: ran.append(task.payload["n"]))
    try:
        assert scheduler.wait(timeout=60)
    finally:
        scheduler.close()
    return sorted(ran)


def assert_quarantined(task: Task | None) -> None:
    assert task is not None and task.status == "failed", task
    assert task.payload in ({}, {"n": 0}), task  # its payload, when the record reads now
    assert task.error is not None and task.error.startswith("Quarantined: "), task.error


#: (queue, case) for every case a queue can store.
CASES = [(queue, case) for case, (_, _, queues) in POISONS.items() for queue in queues]


@pytest.mark.parametrize("state", ["pending", "expired"])
@pytest.mark.parametrize(("queue_poison", "case"), CASES, indirect=["queue_poison"])
def test_a_poisoned_task_is_quarantined_and_the_others_run(
    queue_poison: tuple[TaskQueue, Poison], case: str, state: str
) -> None:
    """Finding 5 of issue 24 (one bad task stops the whole queue): a task poisoned in storage,
    waiting or held by a dead worker, made every claim fail; now the claim quarantines it and
    the other tasks run, and the listing shows it failed with the reason."""
    queue, poison = queue_poison
    bad = poisoned(queue, poison, case, state)
    good = [queue.submit("work", {"n": n}, cube_id="c1") for n in (1, 2, 3)]
    assert run_all(queue) == [1, 2, 3]
    listed = {t.task_id: t for t in queue.tasks()}
    assert set(listed) == {bad, *good}
    assert [listed[g].status for g in good] == ["done"] * 3
    assert_quarantined(listed[bad])
    assert_quarantined(queue.get(bad))
    assert [t.task_id for t in queue.tasks(status="failed")] == [bad]
    assert queue.outstanding() == 0
    assert queue.claim(30) is None
    # A retry cannot run a record that is still unreadable: it ends quarantined again.  Two
    # records read now: the quarantine wrote a known status over the unknown one, and an SQL
    # retry writes max_attempts (attempts + 1) over the one that was not a number.
    queue.retry(bad)
    readable_now = case == "status unknown" or (
        case == "max_attempts not a number" and kind_of(queue) == "sqlite"
    )
    assert run_all(queue) == ([0] if readable_now else [])
    if not readable_now:
        assert_quarantined(queue.get(bad))
    assert queue.outstanding() == 0


@pytest.mark.parametrize(
    ("queue_poison", "case"),
    [(q, c) for q, c in CASES if c in ("payload not JSON", "max_attempts not a number")],
    indirect=["queue_poison"],
)
def test_listing_shows_a_poisoned_task_before_any_claim(
    queue_poison: tuple[TaskQueue, Poison], case: str
) -> None:
    """Finding 5 of issue 24: a task with an unreadable record made the listing raise (GET
    /tasks answered 500 for everyone); now it is listed, marked quarantined, and a listing of
    the status it was stored in skips it."""
    queue, poison = queue_poison
    bad = poisoned(queue, poison, case, "pending")
    good = queue.submit("work", {"n": 1}, cube_id="c1")
    [shown_bad] = [t for t in queue.tasks() if t.task_id == bad]
    assert_quarantined(shown_bad)
    assert [t.task_id for t in queue.tasks(status="pending")] == [good]
    assert [t.task_id for t in queue.tasks(cube_id="c1", limit=1)] == [good]  # the newest


@pytest.mark.parametrize("queue_poison", ["redis"], indirect=True)
def test_a_redis_key_that_is_not_a_hash_is_put_aside(
    queue_poison: tuple[TaskQueue, Poison],
) -> None:
    """Finding 5 of issue 24: a task key replaced by a string (WRONGTYPE on every script that
    touched it) no longer stops claims or listings; it is dropped from the queue's sets."""
    queue, poison = queue_poison
    bad = queue.submit("work", {"n": 0}, cube_id="c1")
    waiting = queue.submit("work", {"n": 1}, cube_id="c1")
    poison.not_a_hash(bad)
    assert [t.task_id for t in queue.tasks()] == [waiting]
    assert queue.get(bad) is None
    assert run_all(queue) == [1]
    assert queue.outstanding() == 0


def test_a_worker_thread_goes_on_after_a_poisoned_claim(
    queue_poison: tuple[TaskQueue, Poison], caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 5 of issue 24: the Redis claim script failed on every call once a dead worker's
    task had a ``max_attempts`` that is not a number, and the worker logged a traceback per
    poll; now its worker threads quarantine it once (one warning line) and run the rest."""
    queue, poison = queue_poison
    case = "payload not JSON" if kind_of(queue) == "postgres" else "max_attempts not a number"
    bad = poisoned(queue, poison, case, "expired")
    ran: list[int] = []
    scheduler = Scheduler(queue, workers=2, poll_s=0.05)
    scheduler.register("work", lambda task: ran.append(task.payload["n"]))
    with caplog.at_level(logging.INFO, logger="memstrata"):
        scheduler.start()
        try:
            for n in range(1, 6):
                scheduler.submit("work", {"n": n}, cube_id="c1")
            assert scheduler.wait(timeout=60)
        finally:
            scheduler.close()
    assert sorted(ran) == [1, 2, 3, 4, 5]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w for w in warnings if bad in w and "quarantined" in w] == warnings
    assert len(warnings) == 1
    assert_quarantined(queue.get(bad))


def test_a_listing_of_some_cubes_counts_only_their_tasks(
    queue_poison: tuple[TaskQueue, Poison],
) -> None:
    """Finding 7 of issue 24 (``/tasks`` hides a user's own tasks): the limit applied to every
    user's tasks before the filter; the queue now takes the cubes and lists only theirs."""
    queue, _ = queue_poison
    mine = [queue.submit("work", {"n": n}, cube_id=f"bob{n % 2}") for n in range(7)]
    theirs = [queue.submit("work", {"n": n}, cube_id="alice") for n in range(110)]
    newest_first = mine[::-1]
    assert [t.task_id for t in queue.tasks(limit=100)] == theirs[::-1][:100]
    assert [t.task_id for t in queue.tasks(cube_ids=["bob0", "bob1"])] == newest_first
    assert [t.task_id for t in queue.tasks(cube_ids=["bob1", "bob0"], limit=3)] == mine[::-1][:3]
    assert [t.task_id for t in queue.tasks(cube_ids=["bob0"])] == mine[::-2]
    assert [t.task_id for t in queue.tasks("bob1", cube_ids=["bob0", "bob1"])] == mine[-2::-2]
    assert queue.tasks("alice", cube_ids=["bob0"]) == []
    assert queue.tasks(cube_ids=[]) == []
    assert queue.tasks(status="done", cube_ids=["bob0", "bob1"]) == []


# -- through MemoryOS and REST, on each engine with its own queue and with Redis ----------------


@dataclass
class Service:
    memory: MemoryOS
    poison: Poison


@pytest.fixture(params=["own queue", "redis"])
def service(request: pytest.FixtureRequest, engine: str, database: str) -> Iterator[Service]:
    """A MemoryOS (inline tasks) on ``engine``, its tasks in the database or in Redis."""
    with ExitStack() as stack:
        settings = {}
        where = database
        if request.param == "redis":
            where = settings["redis_url"] = stack.enter_context(fresh_redis())
        memory = stack.enter_context(MemoryOS.open(database, workers=0, **settings))
        yield Service(memory, Poison(where))


def test_a_user_sees_all_of_his_tasks_however_many_others_have(service: Service) -> None:
    """Finding 7 of issue 24 (``/tasks`` hides a user's own tasks): after Alice made 110 tasks,
    Bob listed none of his 13; now he lists all 13 and none of hers."""
    memory = service.memory
    for user in ("alice", "bob"):
        memory.create_user(user)
        memory.create_cube("notes", owner=user, cube_id=f"{user}-notes")
    queue = memory.scheduler.queue
    bobs = [queue.submit("work", {"n": n}, cube_id="bob-notes") for n in range(13)]
    alices = [queue.submit("work", {"n": n}, cube_id="alice-notes") for n in range(110)]
    listed = memory.tasks(user_id="bob")
    assert [t.task_id for t in listed] == bobs[::-1]
    assert [t.task_id for t in memory.tasks(user_id="bob", limit=5)] == bobs[::-1][:5]
    assert [t.task_id for t in memory.tasks(user_id="alice")] == alices[::-1][:100]


def test_rest_lists_a_poisoned_task_and_the_queue_goes_on(service: Service) -> None:
    """Finding 5 of issue 24: ``GET /tasks`` answered 500 for every user once one task's
    payload was unreadable; now it answers 200 and shows that task failed, quarantined, and
    the next claim quarantines it for good while the other tasks run."""
    memory = service.memory
    key = bootstrap(memory)
    assert key is not None
    memory.create_cube("notes", owner="admin", cube_id="notes")
    queue = memory.scheduler.queue
    bad = queue.submit("work", {"n": 0}, cube_id="notes")
    good = queue.submit("work", {"n": 1}, cube_id="notes")
    service.poison.set(bad, "payload", json.dumps([1, 2]))
    with serving(create_app(memory)) as url, httpx.Client(base_url=url, timeout=60) as http:
        http.headers["Authorization"] = f"Bearer {key}"
        answer = http.get("/tasks")
        assert answer.status_code == 200, answer.text
        shown = {t["task_id"]: t for t in answer.json()}
        assert shown[bad]["status"] == "failed"
        assert shown[bad]["error"].startswith("Quarantined: payload is not a JSON object")
        assert shown[good]["status"] == "pending"
        retried = http.post(f"/tasks/{bad}/retry")
        assert retried.status_code < 500, retried.text
    ran: list[int] = []
    memory.scheduler.register("work", lambda task: ran.append(task.payload["n"]))
    assert memory.wait(timeout=60)
    assert ran == [1]
    [stored] = [t for t in memory.tasks(user_id="admin") if t.task_id == bad]
    assert stored.status == "failed" and stored.error is not None
    assert stored.error.startswith("Quarantined: ")
