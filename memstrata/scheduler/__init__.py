"""The durable task scheduler: a ``Scheduler`` running the tasks of a ``TaskQueue``."""

from memstrata.scheduler.runner import Handler, Scheduler
from memstrata.store.queue import Task, TaskQueue, TaskStatus

__all__ = ["Handler", "Scheduler", "Task", "TaskQueue", "TaskStatus"]
