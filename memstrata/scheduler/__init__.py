"""The durable task scheduler (DESIGN §8): a ``TaskQueue`` of rows and a ``Scheduler`` running them."""

from memstrata.scheduler.base import Task, TaskQueue, TaskStatus
from memstrata.scheduler.runner import Handler, Scheduler
from memstrata.scheduler.sqlite import SQLiteTaskQueue

__all__ = ["Handler", "SQLiteTaskQueue", "Scheduler", "Task", "TaskQueue", "TaskStatus"]
