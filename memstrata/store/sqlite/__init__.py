"""The SQLite engine (the embedded default): one file, WAL, FTS5 and numpy vectors (DESIGN §7)."""

from memstrata.store.sqlite.store import SQLiteStore
from memstrata.store.sqlite.tasks import SQLiteTaskQueue

__all__ = ["SQLiteStore", "SQLiteTaskQueue"]
