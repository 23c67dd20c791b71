"""``memstrata tasks list`` and ``memstrata tasks retry``, end to end through CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from memstrata import MemoryOS
from tests.test_cli import _clean_environment, invoke  # noqa: F401 (an autouse fixture)


def failed_consolidation(db_path: Path) -> str:
    """Users alice (owner of cube ``notes``) and bob (no grant), and a consolidation of ``notes``
    that failed for good (the database was locked, say); its id."""
    with MemoryOS.open(str(db_path), workers=0) as mos:
        mos.create_user("alice")
        mos.create_user("bob")
        mos.create_cube("Notes", owner="alice", cube_id="notes")
        queue = mos.scheduler.queue
        task_id = queue.submit("consolidate", {}, cube_id="notes", max_attempts=1)
        claimed = queue.claim(30)
        assert claimed is not None and claimed.task_id == task_id
        assert queue.fail(task_id, "StorageError: the database is locked", None)
    return task_id


def test_list_then_retry_a_failed_task(db_path: Path) -> None:
    task_id = failed_consolidation(db_path)
    db = ("--db", str(db_path))
    listed = invoke(*db, "tasks", "list", "--user", "alice", "--status", "failed")
    assert listed.exit_code == 0, listed.output
    [line] = listed.stdout.splitlines()
    assert line.split()[:5] == [task_id, "consolidate", "notes", "failed", "1/1"]
    assert line.endswith("StorageError: the database is locked")
    assert invoke(*db, "tasks", "list", "--user", "bob").stdout == ""  # not bob's cube
    hidden = invoke(*db, "tasks", "retry", task_id, "--user", "bob")
    hint = "(list your tasks first)"
    assert hidden.exit_code == 1
    assert hidden.stderr == f"error: no background task {task_id!r} that you can see {hint}\n"
    retried = invoke(*db, "--json", "tasks", "retry", task_id, "--user", "alice")
    assert retried.exit_code == 0, retried.output
    task = json.loads(retried.stdout)  # run in the command's process before it printed
    assert (task["task_id"], task["status"], task["attempts"], task["error"]) == (
        task_id, "done", 2, None,
    )  # fmt: skip
    again = invoke(*db, "tasks", "retry", task_id, "--user", "alice")
    assert again.exit_code == 1 and "is done, not failed" in again.stderr
    shown = invoke(*db, "--json", "tasks", "list", "--user", "alice", "--cube", "notes",
                   "--status", "done", "--limit", "1")  # fmt: skip
    assert [t["task_id"] for t in json.loads(shown.stdout)] == [task_id]


def test_bad_options_are_usage_errors(db_path: Path) -> None:
    failed_consolidation(db_path)
    for args in (["--status", "stuck"], ["--limit", "0"], []):
        result = invoke("--db", str(db_path), "tasks", "list", *args)
        assert result.exit_code == 2 and result.stderr.startswith("error: "), args
