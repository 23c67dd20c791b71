"""The PostgreSQL engine (scale-out): pgvector, ``tsvector`` full text, a pooled connection per
thread.  Needs the ``postgres`` extra (psycopg 3)."""

from memstrata.store.postgres.store import PostgresStore
from memstrata.store.postgres.tasks import PostgresTaskQueue

__all__ = ["PostgresStore", "PostgresTaskQueue"]
