"""The SQLite engine (the embedded default): one file, WAL, FTS5 and numpy vectors."""

from memstrata.store.sqlite.store import SQLiteStore
from memstrata.store.sqlite.tasks import SQLiteTaskQueue

__all__ = ["SQLiteStore", "SQLiteTaskQueue"]
