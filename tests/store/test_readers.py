"""The per-thread read connections of ``SQLiteDatabase``: a server's request threads come and go
(a thread pool retires idle threads), and the reader of a thread that has ended is closed when
the next one is opened, so open connections follow the live threads, not every thread ever."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memstrata.store.sqlite import SQLiteStore


def open_files(path: Path) -> int:
    """Descriptors of this process open on ``path`` (Linux)."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_readers_of_ended_threads_are_closed(tmp_path: Path) -> None:
    db = tmp_path / "readers.db"
    store = SQLiteStore(db)
    try:
        store.get_meta("embedder")  # this thread's reader
        before = open_files(db)
        for _ in range(20):  # twenty short-lived threads, one read each
            thread = threading.Thread(target=store.get_meta, args=("embedder",))
            thread.start()
            thread.join()
        # The last thread's reader, and a closed one's descriptor that SQLite keeps for reuse
        # (closing it would drop the process's locks on the file); before, one per thread.
        assert open_files(db) <= before + 2
    finally:
        store.close()
    assert open_files(db) == 0
