"""The queues under test: every queue test runs against the SQLite queue, the PostgreSQL queue
and the Redis queue (the last two are skipped, or fail in CI, without test servers:
``tests/services.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata.scheduler import TaskQueue
from memstrata.store.redis import RedisTaskQueue
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue
from tests.services import fresh_database, fresh_redis

QUEUES = ["sqlite", "postgres", "redis"]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "tasks.db"


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db)
    yield s
    s.close()


@pytest.fixture(params=QUEUES)
def address(request: pytest.FixtureRequest, db: Path) -> Iterator[str]:
    """Where the queue lives, as ``tests/scheduler/task_worker.py`` takes it: the SQLite file,
    a new PostgreSQL database, or the URL of an emptied Redis database."""
    if request.param == "sqlite":
        yield str(db)
    elif request.param == "postgres":
        with fresh_database() as dsn:
            yield dsn
    else:
        with fresh_redis() as url:
            yield url


@pytest.fixture
def queue(address: str, store: SQLiteStore) -> Iterator[TaskQueue]:
    if address.startswith("redis://"):
        with RedisTaskQueue(address) as redis_queue:
            yield redis_queue
    elif address.startswith("postgresql://"):
        from memstrata.store.postgres import PostgresStore, PostgresTaskQueue

        pg = PostgresStore(address)
        yield PostgresTaskQueue(pg)
        pg.close()
    else:
        yield SQLiteTaskQueue(store)
