"""Which engine a database address opens, and which task queue goes with it.

``open_store(settings)``: ``postgresql://…`` (or ``postgres://…``, or libpq's ``key=value``
form) opens ``PostgresStore``; any other address is an SQLite file (``SQLiteStore``).
``open_queue(settings, store)``: the Redis stream at ``settings.redis_url`` when one is set, else
the queue kept in the store's own database (``store_queue``).
"""

from __future__ import annotations

import re

from memstrata.config import Settings
from memstrata.store.base import Store
from memstrata.store.queue import TaskQueue
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue

#: How a PostgreSQL address starts: a URL, or libpq's ``key=value`` form.
_POSTGRES = re.compile(r"(postgres(ql)?://|\s*(host|hostaddr|dbname|user|port|service)=)")


def is_postgres(address: str) -> bool:
    """Whether a database address names a PostgreSQL server (``postgresql://…``, or libpq's
    ``host=… dbname=…``) rather than an SQLite file."""
    return _POSTGRES.match(address) is not None


def open_store(settings: Settings) -> Store:
    """The store at ``settings.db`` (created and migrated when new).

    Raises ``StorageError`` (unreachable server, no pgvector, not our file, …), ``SchemaTooNew``,
    or ``ConfigurationError`` when the PostgreSQL driver is not installed.
    """
    if is_postgres(settings.db):
        from memstrata.store.postgres import PostgresStore

        return PostgresStore(
            settings.db,
            pool_size=settings.pool_size,
            keyword_max_postings=settings.keyword_max_postings,
            artifacts_dir=settings.artifacts_dir,
        )
    return SQLiteStore(
        settings.db,
        busy_timeout_ms=settings.busy_timeout_ms,
        keyword_max_postings=settings.keyword_max_postings,
        vector_index_min_items=settings.vector_index_min_items,
        vector_index_threads=settings.embed_threads,
    )


def store_queue(store: Store) -> TaskQueue:
    """The task queue stored in ``store``'s own database."""
    if isinstance(store, SQLiteStore):
        return SQLiteTaskQueue(store)
    from memstrata.store.postgres import PostgresStore, PostgresTaskQueue

    if isinstance(store, PostgresStore):
        return PostgresTaskQueue(store)
    raise TypeError(f"no task queue for {type(store).__name__}")


def open_queue(settings: Settings, store: Store) -> TaskQueue:
    """The task queue for ``store``: Redis when ``settings.redis_url`` is set (``StorageError``
    when it cannot be reached), else the store's own."""
    if settings.redis_url:
        from memstrata.store.redis import RedisTaskQueue

        return RedisTaskQueue(settings.redis_url)
    return store_queue(store)
