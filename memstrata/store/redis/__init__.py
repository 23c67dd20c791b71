"""The Redis task queue (``pip install 'memstrata[redis]'``): ``RedisTaskQueue``, a ``TaskQueue``
on Redis Streams that worker processes on many machines share (``Settings.redis_url``).

The ``redis`` package is imported when a queue is made, not here, so memstrata imports without it.
"""

from memstrata.store.redis.queue import RedisTaskQueue

__all__ = ["RedisTaskQueue"]
