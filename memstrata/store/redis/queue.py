"""``TaskQueue`` over Redis Streams, so that worker processes on several machines share one queue.

Due tasks are entries of one stream read through one consumer group: a claim is a delivery
(XREADGROUP), a running task's entry stays in the group's pending entries list, and it is
acknowledged (XACK) only when the task is done or has failed for good.  A lease is kept in the
task's hash and in a sorted set of leases: a worker that dies leaves its entry pending under an
expired lease, and the next claim takes the entry over (XCLAIM) and runs the task again.
Delayed tasks (``delay_s``, a retry's backoff) wait in a sorted set until due.  Each change is one
Lua script (``scripts``), so two processes never get the same claim and the attempt fencing holds.
The semantics are ``SQLiteTaskQueue``'s, method for method.

A task whose hash cannot be read is quarantined (``failed``, the reason as its error) by the claim
that meets it, which goes on to the next task: by the script when a field it computes with is
wrong, here when the payload (or another field) is (see ``store.queue`` and ``scripts``).

Times are ``time.time()`` of the calling process, as with SQLite, so machines sharing a queue must
share a clock (NTP).  Redis errors are raised as ``StorageError`` with one line naming the server
(its password hidden).  Thread-safe: the client's connection pool serves every thread.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from memstrata.closing import Closing
from memstrata.errors import ConfigurationError, StorageError
from memstrata.model import new_id
from memstrata.store.queue import (
    LOST_WORKER,
    MAX_QUARANTINED_PER_CLAIM,
    OUTSTANDING,
    Task,
    TaskStatus,
    UnreadableTask,
    check_non_negative,
    check_positive,
    check_status,
    checked_submit,
    in_status,
    listed_task,
    read_task,
    retried,
    scoped_cubes,
    truncate_error,
)
from memstrata.store.redis import scripts

if TYPE_CHECKING:
    from redis import Redis

logger = logging.getLogger("memstrata.scheduler")

#: Seconds to wait for a connection, and for a command's answer (a URL's own options win).
CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 30.0
#: The scripts of ``scripts`` that the queue's methods run.
_SCRIPTS = (
    "SUBMIT", "CLAIM", "QUARANTINE", "RENEW", "COMPLETE", "FAIL", "RELEASE", "RETRY", "TASKS",
)  # fmt: skip


class RedisTaskQueue(Closing):
    """``TaskQueue`` on the Redis at ``url`` (``redis://`` or ``rediss://``), its keys under
    ``prefix`` (see ``scripts``).  Connects at once: ``StorageError`` when the server cannot be
    reached, ``ConfigurationError`` when the ``redis`` package is missing or the URL is not one.

    ``consumer`` names this process in the consumer group (default: host, pid and a random tag).
    """

    def __init__(self, url: str, *, prefix: str = "memstrata", consumer: str | None = None) -> None:
        self.where = _redacted(url)
        self.prefix = prefix
        self.consumer = consumer or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        redis = _redis_module()
        try:
            self._client: Redis = redis.Redis.from_url(
                url,
                decode_responses=True,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=COMMAND_TIMEOUT_S,
            )
        except ValueError as exc:
            raise ConfigurationError(
                f"not a Redis URL: {self.where} ({exc})", hint="e.g. redis://127.0.0.1:6379/0"
            ) from exc
        self._scripts = {
            name: self._client.register_script(getattr(scripts, name)) for name in _SCRIPTS
        }
        with self._errors():
            self._client.ping()

    def submit(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        cube_id: str | None = None,
        dedupe_key: str | None = None,
        max_attempts: int = 5,
        delay_s: float = 0.0,
    ) -> str:
        body = checked_submit(kind, payload, max_attempts, delay_s)
        now = time.time()
        fields = {
            "task_id": new_id(), "kind": kind, "cube_id": cube_id, "payload": body,
            "status": "pending", "attempts": "0", "max_attempts": str(max_attempts),
            "run_after": repr(now + delay_s), "created_at": repr(now), "updated_at": repr(now),
            "dedupe_key": dedupe_key,
        }  # fmt: skip
        present = {name: value for name, value in fields.items() if value is not None}
        return str(self._run("SUBMIT", repr(now), json.dumps(present)))

    def claim(self, lease_s: float, *, skip: Collection[str] = ()) -> Task | None:
        check_positive("lease_s", lease_s)
        for _ in range(MAX_QUARANTINED_PER_CLAIM + 1):
            now = time.time()
            task_id, flat, quarantined = self._run(
                "CLAIM", repr(now), repr(now + lease_s), self.consumer, LOST_WORKER, *skip
            )
            _log_quarantined(quarantined)
            if not task_id:
                return None
            fields = _fields(flat)
            try:
                return read_task(fields)
            except UnreadableTask as exc:  # the script could work on it; Python cannot read it
                attempt = str(fields.get("attempts", ""))
                self._run("QUARANTINE", task_id, attempt, repr(time.time()), exc.reason)
                _log_quarantined([task_id, exc.reason])
        return None

    def renew(self, task_id: str, lease_s: float, *, attempt: int | None = None) -> bool:
        check_positive("lease_s", lease_s)
        now = time.time()
        return self._change("RENEW", task_id, attempt, now, repr(now + lease_s), self.consumer)

    def complete(self, task_id: str, *, attempt: int | None = None) -> bool:
        return self._change("COMPLETE", task_id, attempt, time.time())

    def fail(
        self,
        task_id: str,
        error: str,
        retry_in_s: float | None,
        *,
        attempt: int | None = None,
    ) -> bool:
        now = time.time()
        retry_at = ""
        if retry_in_s is not None:
            check_non_negative("retry_in_s", retry_in_s)
            retry_at = repr(now + retry_in_s)
        return self._change("FAIL", task_id, attempt, now, truncate_error(error), retry_at)

    def release(self, task_id: str, *, attempt: int | None = None) -> bool:
        return self._change("RELEASE", task_id, attempt, time.time())

    def retry(self, task_id: str) -> Task:
        changed = bool(self._run("RETRY", task_id, repr(time.time())))
        return retried(task_id, changed, self.get(task_id))

    def get(self, task_id: str) -> Task | None:
        with self._errors():
            try:
                fields = cast(dict[str, str], self._client.hgetall(self._key("task", task_id)))
            except _redis_module().ResponseError:  # the key is not a hash: no task there
                return None
        return listed_task(task_id, fields) if fields else None

    def tasks(
        self,
        cube_id: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 100,
        *,
        cube_ids: Collection[str] | None = None,
    ) -> list[Task]:
        check_status(status)
        scope = scoped_cubes(cube_id, cube_ids)
        if limit == 0 or scope == []:
            return []
        last = -1 if limit < 0 else limit - 1  # as SQLite's LIMIT: a negative one is no limit
        found = self._run("TASKS", status or "all", str(last), *(scope or ()))
        return in_status([listed_task(task_id, _fields(flat)) for task_id, flat in found], status)

    def outstanding(self, cube_id: str | None = None) -> int:
        with self._errors(), self._client.pipeline(transaction=True) as pipe:
            for status in OUTSTANDING:
                pipe.zcard(self._index(status, cube_id))
            return sum(int(count) for count in pipe.execute())

    def close(self) -> None:
        """Leave the consumer group (when this process holds no entry) and disconnect.

        Idempotent; a Redis gone by now is not an error (there is nothing left to tidy).
        """
        forget = self._client.register_script(scripts.FORGET_CONSUMER)
        try:
            forget(args=[self.prefix, self.consumer])
        except _redis_module().RedisError:
            pass
        self._client.close()

    # -- helpers -----------------------------------------------------------------------------

    def _change(
        self, script: str, task_id: str, attempt: int | None, now: float, *rest: str
    ) -> bool:
        """Run one of the fenced scripts on a running task; whether it changed it."""
        fence = "" if attempt is None else str(attempt)
        return bool(self._run(script, task_id, fence, repr(now), *rest))

    def _run(self, script: str, *args: str) -> Any:
        with self._errors():
            return self._scripts[script](args=[self.prefix, *args])

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def _index(self, bucket: str, cube_id: str | None) -> str:
        return self._key("by", bucket) if cube_id is None else self._key("by", bucket, cube_id)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Raise Redis's errors as ``StorageError``, in one line that names the server."""
        redis = _redis_module()
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StorageError(f"cannot reach Redis at {self.where}: {_line(exc)}") from exc
        except redis.RedisError as exc:
            raise StorageError(f"Redis at {self.where} failed: {_line(exc)}") from exc


def _redis_module() -> Any:
    """The ``redis`` package, imported on first use so memstrata imports without it."""
    try:
        import redis
    except ImportError as exc:
        raise ConfigurationError(
            "the Redis task queue needs the redis package", hint="pip install 'memstrata[redis]'"
        ) from exc
    return redis


def _redacted(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _fields(flat: list[str]) -> dict[str, str]:
    """A hash as a script returns it (a flat list of names and values) as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _log_quarantined(flat: list[str]) -> None:
    """One WARNING line per task a claim quarantined (``flat``: id, reason, id, reason …)."""
    for task_id, reason in zip(flat[::2], flat[1::2], strict=True):
        logger.warning("task %s quarantined: its stored record is unreadable (%s)", task_id, reason)
