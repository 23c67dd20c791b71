"""The external engines some tests need: a PostgreSQL server (with pgvector) and Redis.

``.ci/services start VENV`` starts throwaway ones and prints their addresses as
``MEMSTRATA_TEST_POSTGRES`` (a DSN whose user may create databases) and ``MEMSTRATA_TEST_REDIS``.
Without them a test that needs one is skipped with that reason; with
``MEMSTRATA_TEST_REQUIRE_SERVICES=1`` (CI) it fails instead, so CI never skips them.

``fresh_database`` gives each test a database of its own (created, then dropped); ``fresh_redis``
a Redis database emptied before and after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

POSTGRES_ENV = "MEMSTRATA_TEST_POSTGRES"
REDIS_ENV = "MEMSTRATA_TEST_REDIS"
HOW = "start one with `.ci/services start .venv` and export what it prints"


def _required(env: str, what: str) -> str:
    value = os.environ.get(env)
    if value:
        return value
    message = f"{what} not available: {env} is not set ({HOW})"
    if os.environ.get("MEMSTRATA_TEST_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def postgres_server() -> str:
    """The DSN of the test PostgreSQL server (skips or fails the test when there is none)."""
    return _required(POSTGRES_ENV, "PostgreSQL")


def redis_server() -> str:
    """The URL of the test Redis server (skips or fails the test when there is none)."""
    return _required(REDIS_ENV, "Redis")


def _with_database(dsn: str, name: str) -> str:
    """``dsn`` (a ``postgresql://`` URL) naming database ``name`` instead."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database on the test server, as a DSN; dropped afterwards."""
    import psycopg

    server = postgres_server()
    name = f"memstrata_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        dsn = _with_database(server, name)
        assert dsn.startswith("postgresql://"), dsn  # never taken for a file name
        yield dsn
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_redis() -> Iterator[str]:
    """The test Redis server's URL, its database emptied before and after."""
    import redis

    url = redis_server()
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        yield url
    finally:
        client.flushdb()
        client.close()
