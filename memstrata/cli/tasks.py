"""``memstrata tasks …``: list the background tasks of a user's cubes, and retry a failed one."""

from __future__ import annotations

from typing import cast, get_args

import click

from memstrata.cli import render
from memstrata.cli.app import emit, user_option, with_memory
from memstrata.limits import MAX_TOP_K
from memstrata.memory.system import MemoryOS
from memstrata.scheduler import Task, TaskStatus


@click.group()
def tasks() -> None:
    """List background tasks (consolidation, promotion, …); retry a failed one."""


@tasks.command("list")
@user_option
@click.option("--cube", "cube_id", metavar="ID", help="Only this cube's tasks  [default: all]")
@click.option("--status", type=click.Choice(get_args(TaskStatus)), help="Only tasks in this state.")
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(1, MAX_TOP_K),
    help="At most this many tasks.",
)
@with_memory
def tasks_list(
    memory: MemoryOS, user_id: str, cube_id: str | None, status: str | None, limit: int
) -> None:
    """List the recent tasks of the cubes USER may read, newest first."""
    found = memory.tasks(
        user_id=user_id, cube_id=cube_id, status=cast(TaskStatus | None, status), limit=limit
    )
    emit(found, render.table(map(task_row, found)))


@tasks.command("retry")
@click.argument("task_id")
@user_option
@with_memory
def tasks_retry(memory: MemoryOS, task_id: str, user_id: str) -> None:
    """Give the failed task TASK_ID one more attempt, run now (needs write on its cube)."""
    task = memory.retry_task(task_id, user_id=user_id)
    emit(task, render.table([task_row(task)]))


def task_row(task: Task) -> tuple[str, ...]:
    """A task as one line: id, kind, cube, state, attempts, last change, and its last error."""
    return (task.task_id, task.kind, task.cube_id or "-", task.status,
            f"{task.attempts}/{task.max_attempts}", render.iso(task.updated_at),
            render.short(task.error or "-"))  # fmt: skip
