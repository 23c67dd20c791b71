"""What a page says after an action: a fixed message chosen by a code, never text from the URL.

An action (a POST) redirects to a page with ``done=<code>`` in the query, and the page shows the
message of that code, filled only with what the core says now (the item's version and status, the
task's state) and with whole numbers; an unknown code shows nothing.  A page never shows free text
from its query as its own notice: a link ``…?done=Your session expired, paste your key at …``
would otherwise speak in the inspector's voice.
"""

from __future__ import annotations

from memstrata.model import MemoryItem
from memstrata.scheduler import Task
from memstrata.server.ui.markup import Markup, tag

__all__ = [
    "DELETED",
    "ERASED",
    "MOVED",
    "RETRIED",
    "ROLLED_BACK",
    "about_cube",
    "about_item",
    "about_tasks",
    "notice",
]

#: The codes an action's redirect carries in ``done``.
ROLLED_BACK = "rolled-back"
MOVED = "moved"
DELETED = "deleted"
ERASED = "erased"
RETRIED = "retried"


def notice(message: str | None) -> Markup:
    """``message`` as the page's notice; nothing when None."""
    return tag("p", message, class_="notice") if message else Markup("")


def number(raw: str) -> int | None:
    """A whole number of the query (ASCII digits, at most 9); None for anything else."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None


def about_item(done: str, n: str, item: MemoryItem) -> Markup:
    """The item page's notice: ``done`` a code of ``ROLLED_BACK`` (``n``: the version rolled
    back to), ``MOVED`` or ``DELETED``, told with the item as the core has it now."""
    message = None
    if done == ROLLED_BACK and (version := number(n)) is not None:
        message = f"Rolled back to version {version} (now {item.version})."
    elif done == MOVED:
        message = f"Moved to {item.status} (version {item.version})."
    elif done == DELETED:
        message = "Deleted."
    return notice(message)


def about_cube(done: str, n: str) -> Markup:
    """The cube page's notice: ``ERASED`` (``n``: how many items were erased)."""
    count = number(n)
    if done == ERASED and count is not None:
        return notice(f"Erased {count} item(s) for good.")
    return Markup("")


def about_tasks(done: str, task_id: str, tasks: list[Task]) -> Markup:
    """The tasks page's notice: ``RETRIED``, saying where the task ``task_id`` stands when it is
    among ``tasks`` (those the core listed for this user), else only that a task was retried."""
    if done != RETRIED:
        return Markup("")
    for task in tasks:
        if task.task_id == task_id:
            return notice(f"Task {task.task_id} ({task.kind}) retried: now {task.status}.")
    return notice("The task was retried.")
