"""Which ``TaskQueue`` the settings ask for, when it is not the store's own."""

from __future__ import annotations

from memstrata.config import Settings
from memstrata.store.queue import TaskQueue
from memstrata.store.redis import RedisTaskQueue


def make_queue(settings: Settings) -> TaskQueue | None:
    """A ``RedisTaskQueue`` on ``settings.redis_url``, connected; ``None`` when it is unset or
    empty (the caller then keeps its tasks in the store's own queue).

    Raises ``StorageError`` when that Redis cannot be reached, ``ConfigurationError`` when the
    URL is not a Redis URL or the ``redis`` package is missing.  The caller closes the queue
    (``RedisTaskQueue.close``) after the scheduler that uses it.
    """
    if not settings.redis_url:
        return None
    return RedisTaskQueue(settings.redis_url)
