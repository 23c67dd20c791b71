"""What only the Redis queue has: its errors, its stream and consumer group, delayed tasks moving
into the stream, and key prefixes.  Its ``TaskQueue`` semantics are tested with the SQLite queue's
(``test_scheduler.py``, ``test_leases.py``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memstrata.config import Settings
from memstrata.errors import ConfigurationError, StorageError
from memstrata.store.engines import open_queue
from memstrata.store.redis import RedisTaskQueue
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue
from tests.services import fresh_redis


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_redis() as address:
        yield address


@pytest.fixture
def client(url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(url, decode_responses=True) as c:
        yield c


def test_an_unreachable_redis_is_one_storage_error_line() -> None:
    with pytest.raises(StorageError) as caught:
        RedisTaskQueue("redis://:secret@127.0.0.1:1/0")
    message = str(caught.value)
    assert message.startswith("cannot reach Redis at redis://:***@127.0.0.1:1/0: ")
    assert "\n" not in message and "secret" not in message


def test_a_url_that_is_not_redis_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not a Redis URL"):
        RedisTaskQueue("http://127.0.0.1:6379")


def test_without_the_redis_package_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis now raises ImportError
    with pytest.raises(ConfigurationError, match=r"pip install 'memstrata\[redis\]'"):
        RedisTaskQueue("redis://127.0.0.1:6379/0")


def test_a_task_is_a_stream_entry_acknowledged_only_when_done(
    url: str, client: redis.Redis
) -> None:
    with RedisTaskQueue(url, prefix="q") as queue:
        task_id = queue.submit("k", {})
        assert client.xlen("q:stream") == 1
        claimed = queue.claim(30)
        assert claimed is not None and claimed.task_id == task_id
        pending = client.xpending("q:stream", "workers")
        assert pending["pending"] == 1
        assert pending["consumers"] == [{"name": queue.consumer, "pending": 1}]
        assert queue.fail(task_id, "ValueError: once", retry_in_s=60)  # waits, unacknowledged
        assert client.xpending("q:stream", "workers")["pending"] == 0
        assert client.zscore("q:delayed", task_id) is not None
        assert client.xlen("q:stream") == 0
    with RedisTaskQueue(url, prefix="q") as other:  # a second process: nothing due for it
        assert other.claim(30) is None
        assert other.outstanding() == 1


def test_a_dead_workers_entry_passes_to_the_next_claimer(url: str, client: redis.Redis) -> None:
    with RedisTaskQueue(url, prefix="q") as dead, RedisTaskQueue(url, prefix="q") as alive:
        task_id = dead.submit("k", {})
        assert dead.claim(lease_s=0.05) is not None
        time.sleep(0.08)
        again = alive.claim(lease_s=30)
        assert again is not None and (again.task_id, again.attempts) == (task_id, 2)
        pending = client.xpending("q:stream", "workers")
        assert pending["consumers"] == [{"name": alive.consumer, "pending": 1}]
        assert alive.complete(task_id, attempt=2)
        assert client.xpending("q:stream", "workers")["pending"] == 0


def test_delayed_tasks_enter_the_stream_in_due_order(url: str) -> None:
    with RedisTaskQueue(url) as queue:
        late = queue.submit("k", {}, delay_s=0.1)
        early = queue.submit("k", {}, delay_s=0.05)
        time.sleep(0.12)
        now = queue.submit("k", {})  # due after both: they move into the stream first
        claimed = [queue.claim(30) for _ in range(4)]
    assert [t.task_id if t else None for t in claimed] == [early, late, now, None]


def test_prefixes_keep_queues_apart(url: str) -> None:
    with RedisTaskQueue(url, prefix="a") as a, RedisTaskQueue(url, prefix="b") as b:
        a.submit("k", {}, cube_id="c1", dedupe_key="same")
        b.submit("k", {}, cube_id="c1", dedupe_key="same")
        assert (a.outstanding("c1"), b.outstanding("c1")) == (1, 1)
        assert len(a.tasks()) == len(b.tasks()) == 1
        assert b.claim(30) is not None and a.claim(30) is not None


def test_closing_leaves_the_consumer_group_unless_it_holds_an_entry(
    url: str, client: redis.Redis
) -> None:
    def consumers() -> set[str]:
        return {c["name"] for c in client.xinfo_consumers("q:stream", "workers")}

    busy, idle = RedisTaskQueue(url, prefix="q"), RedisTaskQueue(url, prefix="q")
    for queue in (busy, idle):
        queue.submit("k", {})
        assert queue.claim(30) is not None
    (done,) = idle.tasks(status="running", limit=1)  # the newest: idle's
    assert idle.complete(done.task_id)
    assert consumers() == {busy.consumer, idle.consumer}
    idle.close()
    busy.close()  # its entry stays pending under its name, to be claimed once the lease ends
    assert consumers() == {busy.consumer}


def test_the_setting_chooses_the_queue(url: str, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "q.db")
    try:
        for unset in ({}, {"MEMSTRATA_REDIS_URL": ""}):
            assert isinstance(open_queue(Settings.load(environ=unset), store), SQLiteTaskQueue)
        queue = open_queue(Settings.load(environ={"MEMSTRATA_REDIS_URL": url}), store)
        assert isinstance(queue, RedisTaskQueue)
        queue.close()
    finally:
        store.close()
