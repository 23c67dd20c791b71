"""A scheduler in its own process, for the cross-process tests of ``test_scheduler.py``.

``task_worker.py crash QUEUE MARKER``: run ``slow`` tasks that touch MARKER and then hang, until
killed.  ``task_worker.py share QUEUE OUT``: print ``ready``, wait for a line on stdin, then run
``job`` tasks (appending each task's id to OUT) until none is outstanding.  QUEUE is an SQLite
file, a ``postgresql://`` DSN or a ``redis://`` URL.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memstrata.scheduler import Scheduler, Task, TaskQueue
from memstrata.store.redis import RedisTaskQueue
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue


def open_queue(address: str) -> tuple[TaskQueue, Callable[[], None]]:
    """The queue at ``address`` and what closes it."""
    if address.startswith("redis://"):
        queue = RedisTaskQueue(address)
        return queue, queue.close
    if address.startswith("postgresql://"):
        from memstrata.store.postgres import PostgresStore, PostgresTaskQueue

        pg = PostgresStore(address)
        return PostgresTaskQueue(pg), pg.close
    store = SQLiteStore(address)
    return SQLiteTaskQueue(store), store.close


def crash(address: str, marker: str) -> None:
    def slow(task: Task) -> None:
        Path(marker).write_text(task.task_id)
        time.sleep(60)

    queue, _ = open_queue(address)
    scheduler = Scheduler(queue, workers=1, lease_s=0.5, poll_s=0.05)
    scheduler.register("slow", slow)
    scheduler.start()
    threading.Event().wait()  # until SIGKILL


def share(address: str, out: str) -> None:
    lock = threading.Lock()

    def job(task: Task) -> None:
        time.sleep(0.005)  # long enough for the two processes' claims to interleave
        with lock, open(out, "a", encoding="utf-8") as f:
            f.write(f"{task.task_id} {os.getpid()}\n")

    queue, close = open_queue(address)
    with Scheduler(queue, workers=2, poll_s=0.05) as scheduler:
        scheduler.register("job", job)
        print("ready", flush=True)
        sys.stdin.readline()
        scheduler.start()
        if not scheduler.wait(timeout=30):
            sys.exit("tasks still outstanding after 30 s")
    close()


if __name__ == "__main__":
    {"crash": crash, "share": share}[sys.argv[1]](sys.argv[2], sys.argv[3])
