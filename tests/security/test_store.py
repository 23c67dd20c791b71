"""The store's errors on real SQLite files: a locked file and a damaged one (issue 28, §1).

The store's contract (``store/base.py``) is that backend failures leave as ``memstrata.errors``
types, never as driver exceptions.  Before the shared SQL layer, a file another connection held
locked was reported as ``NotOurDatabase`` (a user told to point at another file, when waiting
would do), and SQLite's reads let ``sqlite3.DatabaseError`` out of a damaged file (a REST caller
got an unhandled 500 naming the driver).  Both are replayed here on real files: the lock is a
real exclusive lock held by another connection, the damage real bytes overwritten on disk.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memstrata.errors import NotOurDatabase, StorageError
from memstrata.filters import Filters
from memstrata.model import Cube, MemoryItem, User, new_id
from memstrata.store.sqlite import SQLiteStore

#: Items written before the damage: enough for the items table to span many pages.
ITEMS = 300


def held_locked(path: Path) -> sqlite3.Connection:
    """Another connection holding ``path`` locked: exclusive locking mode, inside an exclusive
    write transaction (nobody else may read or write until it ends)."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")
    return holder


@pytest.mark.parametrize("existing", [True, False], ids=["memstrata-file", "new-file"])
def test_a_locked_file_is_a_storage_error_not_another_applications(
    tmp_path: Path, existing: bool
) -> None:
    """Issue 28, §1: a merely locked SQLite file was reported as ``NotOurDatabase`` ("not a
    memstrata database"); it is a ``StorageError`` saying it is locked, and the file opens
    once the lock is released."""
    path = tmp_path / "memory.db"
    if existing:
        SQLiteStore(path).close()
    holder = held_locked(path)
    try:
        with pytest.raises(StorageError) as raised:
            SQLiteStore(path, busy_timeout_ms=50)
        assert not isinstance(raised.value, NotOurDatabase)
        assert "locked" in str(raised.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    if existing:  # released: the same file opens, ours
        SQLiteStore(path).close()


def test_a_write_on_a_locked_file_is_a_storage_error(tmp_path: Path) -> None:
    """Issue 28, §1: errors leave through one mapping; a write that cannot take the lock is a
    ``StorageError`` that says the database is locked (not a driver error)."""
    path = tmp_path / "memory.db"
    store = SQLiteStore(path, busy_timeout_ms=50)
    try:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # a writer elsewhere: WAL readers go on, writers wait
        try:
            with pytest.raises(StorageError, match="locked"):
                store.put_user(User(user_id="alice", name=None, role="user"))
            assert store.get_user("alice") is None  # reads go on, and nothing was half-written
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    finally:
        store.close()


def damaged_store(tmp_path: Path) -> tuple[Path, list[str]]:
    """A memstrata file with ``ITEMS`` items whose ``items`` table's root page is then
    overwritten with junk on disk; the file still opens (its header, schema and migrations
    are intact).  Returns the path and the items' ids."""
    path = tmp_path / "memory.db"
    store = SQLiteStore(path)
    store.put_user(User(user_id="u1", name=None, role="user"))
    store.put_cube(Cube(cube_id="c1", name="notes", owner="u1", kind="user"))
    items = [
        MemoryItem(id=new_id(), cube_id="c1", text=f"note {n} about the garden", user_id="u1")
        for n in range(ITEMS)
    ]
    vectors = np.eye(ITEMS, 8, dtype=np.float32)
    vectors[:, 0] += 1.0
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.add_items(items, vectors, "test/8")
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'items'").fetchone()
    conn.close()
    with path.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xa5" * page_size)
    return path, [item.id for item in items]


def test_reads_of_a_damaged_file_are_storage_errors(tmp_path: Path) -> None:
    """Issue 28, §1: SQLite's reads let ``sqlite3.DatabaseError`` ("database disk image is
    malformed") out of the store; every read of the damaged table is a ``StorageError`` naming
    the file."""
    path, ids = damaged_store(tmp_path)
    store = SQLiteStore(path)
    try:
        reads = {
            "get_items": lambda: store.get_items(ids[:3], ["c1"]),
            "list_items": lambda: store.list_items("c1", Filters()),
            "count_items": lambda: store.count_items("c1", Filters()),
            "iter_items": lambda: list(store.iter_items("c1")),
            "keyword_search": lambda: store.keyword_search("garden", ["c1"], Filters(), 5),
            "versions_as_of": lambda: store.items_as_of("c1", store.list_users()[0].created_at),
        }
        for name, read in reads.items():
            with pytest.raises(StorageError) as raised:
                read()
            assert not isinstance(raised.value.__cause__, StorageError), name
            assert str(path) in str(raised.value), name
        assert [u.user_id for u in store.list_users()] == ["u1"]  # the rest still reads
    finally:
        store.close()


def test_a_file_that_is_not_sqlite_is_not_ours(tmp_path: Path) -> None:
    """Issue 28, §1 (the other side of the locked file): a file of junk is still
    ``NotOurDatabase``, and is left as it was."""
    path = tmp_path / "memory.db"
    junk = b"not a database, " * 512
    path.write_bytes(junk)
    with pytest.raises(NotOurDatabase):
        SQLiteStore(path)
    assert path.read_bytes() == junk
