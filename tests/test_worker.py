"""``memstrata worker``: runs the background tasks other processes queue, with no HTTP, until
SIGTERM stops it cleanly (exit status 0, nothing left ``running``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from memstrata import MemoryOS
from memstrata.cli.worker import without_password
from tests.serving import STARTUP_S, clean_env

STOP_WITHIN_S = 15.0


def test_the_worker_runs_queued_tasks_until_sigterm(tmp_path: Path) -> None:
    db, log = tmp_path / "memory.db", tmp_path / "worker.log"
    command = [sys.executable, "-m", "memstrata", "--db", str(db), "worker", "--threads", "2"]
    with MemoryOS.open(str(db), workers=0) as memory:  # runs nothing unless asked to
        memory.create_user("alice")
        cube = memory.create_cube("notes", owner="alice", cube_id="notes").cube_id
        queue = memory.scheduler.queue
        # Queued, not run: the core's own consolidation task, as a server with workers = 0 leaves it.
        task_id = queue.submit("consolidate", {}, cube_id=cube)
        with log.open("wb") as out:
            worker = subprocess.Popen(command, stderr=out, env=clean_env())
        try:
            deadline = time.monotonic() + STARTUP_S
            while (task := queue.get(task_id)) and task.status != "done":
                assert worker.poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, f"{task}\n{log.read_text(errors='replace')}"
                time.sleep(0.1)
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(STOP_WITHIN_S)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert queue.outstanding() == 0
    output = log.read_text(errors="replace")
    assert code == 0, output
    assert output.splitlines()[0] == (
        f"memstrata worker: db {db}, queue in the database, 2 thread(s)"
    )
    assert "Traceback" not in output


def test_the_start_line_hides_passwords() -> None:
    assert without_password("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert without_password("postgresql://me:pw@db/m") == "postgresql://me:***@db/m"
    assert without_password("host=db password=pw dbname=m") == "host=db password=*** dbname=m"
    assert without_password("/var/lib/memory.db") == "/var/lib/memory.db"
