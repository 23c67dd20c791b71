"""The background work a caller can see and steer: wait, task lists, retry a failed
task, consolidate now, a cube's artifacts and its KV cache built now.

``MemoryOS`` delegates here.  The tasks themselves (consolidation, promotion, visit counts) are
``memstrata.tiers.tasks``; the queue and its workers are ``memstrata.scheduler``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memstrata.errors import StorageError, TaskNotFound
from memstrata.limits import MAX_ID_CHARS, MAX_TOP_K, check_text
from memstrata.memcube import Artifact
from memstrata.memory.access import check_int
from memstrata.memory.components import Components
from memstrata.model import User, permits
from memstrata.scheduler import Task, TaskStatus


class Background:
    """``MemoryOS``'s calls on background tasks (see the module docs)."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts
        self._access = parts.access

    def wait(
        self,
        cube_id: str | None = None,
        timeout: float | None = None,
        *,
        user_id: str | None = None,
    ) -> bool:
        """Block until no task is outstanding for ``cube_id`` (or at all); False on timeout.

        With ``user_id`` (how every surface calls it) the caller must be able to read
        ``cube_id``, and without ``cube_id`` it waits for each cube that user may read, within
        one ``timeout`` in all.  With ``workers=0`` the due tasks run here, in the caller's
        thread.
        """
        scheduler = self._parts.scheduler
        if user_id is None:
            return scheduler.wait(cube_id, timeout)
        cubes = self._access.readable(user_id, None if cube_id is None else [cube_id])
        deadline = None if timeout is None else time.monotonic() + timeout
        for cube in cubes:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not scheduler.wait(cube.cube_id, left):
                return False
        return True

    def tasks(
        self,
        *,
        user_id: str,
        cube_id: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """Recent background tasks (newest first) of ``cube_id``, or of every readable cube.

        The queue lists only the caller's readable cubes, so ``limit`` counts their tasks alone:
        other users' tasks neither crowd them out nor show how busy others are.  A task whose
        stored record is unreadable is listed as a ``failed`` one, quarantined (never an error).
        """
        check_int(limit, "limit", 1, MAX_TOP_K)
        cubes = self._access.readable(user_id, None if cube_id is None else [cube_id])
        readable = [c.cube_id for c in cubes]
        return self._parts.scheduler.queue.tasks(status=status, limit=limit, cube_ids=readable)

    def retry_task(self, task_id: str, *, user_id: str) -> Task:
        """Give a ``failed`` task one more attempt, due now, and wake a worker (with
        ``workers=0`` it runs here, before returning).  Returns the task as it then stands.

        Needs ``write`` on the task's cube; a task of no cube needs an administrator.
        ``attempts`` and the last ``error`` are kept (``TaskQueue.retry``).  ``TaskNotFound`` for
        an unknown id and for a task the user may not see (of a cube they cannot read; of no
        cube, to a non-administrator), so existence does not leak; ``PermissionDenied`` for a
        cube they may only read; ``TaskNotFailed`` (409) for a task that is not ``failed``.
        """
        user = self._access.user(user_id)
        check_text(task_id, "task_id", MAX_ID_CHARS, line=True)
        task = self._parts.scheduler.queue.get(task_id)
        if task is None or not self._may(user, task, "read"):
            raise TaskNotFound(task_id)
        if task.cube_id is not None:
            self._access.cube(user_id, task.cube_id, "write")
        return self._parts.scheduler.retry(task_id)

    def may_retry(self, task: Task, *, user_id: str) -> bool:
        """Whether ``retry_task`` would take ``task`` (as listed by ``tasks``) from ``user_id``
        now: it is ``failed`` and the user may write its cube (is an administrator, for a task
        of no cube).  For surfaces that offer a retry only where it can succeed."""
        return task.status == "failed" and self._may(self._access.user(user_id), task, "write")

    def _may(self, user: User, task: Task, needed: str) -> bool:
        """Whether ``user`` holds ``needed`` on ``task``'s cube (is an administrator, for a task
        of no cube)."""
        if task.cube_id is None:
            return user.role == "admin"
        return permits(self._parts.store.permission(task.cube_id, user.user_id), needed)

    def consolidate(self, cube_id: str, *, user_id: str, promote_all: bool = False) -> int:
        """Consolidate a cube now, in this thread, instead of waiting for the background task.

        Overflowing working turns move to the mid tier; with ``promote_all`` every active
        segment is also promoted whatever its heat (MemoryOS's ``force_mid_term_analysis``).
        Needs ``write``.  Returns how many findings the long tier took in.
        """
        cube = self._access.cube(user_id, cube_id, "write")
        return self._parts.tiers.consolidate_now(cube, promote_all)

    def artifacts(self, cube_id: str, *, user_id: str) -> list[Artifact]:
        """The cube's artifacts (KV caches, adapters), oldest first: id, kind, fingerprint,
        size, sha256 and metadata (a KV cache's: model, token count, source items' ids and
        versions).  Needs ``read``."""
        self._access.cube(user_id, cube_id, "read")
        return self._parts.store.artifacts(cube_id)

    def build_activation(self, cube_id: str, *, user_id: str) -> Artifact | None:
        """Prefill the local chat model with the cube's stable context now, in this thread,
        and keep its state as the cube's KV cache (``memory.activation``); returns it, or None
        when there is no local model, ``activation_tokens`` is 0 or nothing is stable yet.
        Chats build it in the background anyway; this is for warming up.  Needs ``write``."""
        self._access.cube(user_id, cube_id, "write")
        return self._parts.activation.build(cube_id)

    def train_adapter(
        self,
        cube_id: str,
        *,
        user_id: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> Artifact | None:
        """Train the cube's LoRA adapter on its current long-tier facts and profile now, in this
        thread (``memory.parametric``; minutes on a CPU), and keep it as a ``lora`` artifact;
        returns it (the stored one when nothing changed since), or None when the cube has
        nothing to learn.  The ``train_adapter`` task does the same in the background.
        ``ConfigurationError`` without the ``adapt`` extra.  Needs ``write``.
        ``progress(n, total)`` hears of the training batches done."""
        self._access.cube(user_id, cube_id, "write")
        return self._parts.parametric.train(cube_id, progress)

    def queue_adapter(self, cube_id: str, *, user_id: str) -> Task:
        """Queue the ``train_adapter`` task for the cube (deduplicated: a training already
        waiting is the one returned) and return it; surfaces that must answer at once (REST)
        use this, ``train_adapter`` trains in the caller's thread.  Needs ``write``."""
        self._access.cube(user_id, cube_id, "write")
        task = self._parts.scheduler.queue.get(self._parts.parametric.queue(cube_id))
        if task is None:  # tasks are kept once done: only a queue emptied meanwhile gets here
            raise StorageError(f"the train_adapter task of cube {cube_id!r} is gone")
        return task

    def generate_with_adapter(
        self, cube_id: str, questions: Sequence[str], *, user_id: str, max_tokens: int = 32
    ) -> list[str]:
        """Greedy answers to ``questions`` by the base model with no context, through the
        cube's newest adapter (the base model alone when it has none), in order.  For
        measuring what the adapter learnt (``memstrata eval adapter``).  Needs ``read``."""
        self._access.cube(user_id, cube_id, "read")
        check_int(max_tokens, "max_tokens", 1, 512)
        return self._parts.parametric.answer(cube_id, list(questions), max_tokens)
