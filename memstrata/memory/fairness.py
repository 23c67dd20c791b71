"""Per-user fairness of heavy calls: one user's uploads cannot take every worker (issue 24).

A heavy call is one whose cost grows with what the client sends, up to minutes of embedding: a
document upload (up to ``limits.MAX_DOCUMENT_CHARS`` characters of text) and an ``add`` of more than
``limits.HEAVY_ADD_CHARS`` characters.  ``HeavyCalls`` lets each user run at most
``limits.MAX_HEAVY_CALLS`` of them at once; one more is refused at once with ``Busy`` (429), before
any work, rather than queued, so a client cannot pile up work it may have stopped waiting for.

The count is process-local: each server process (each ``MemoryOS``) keeps its own, so a user may
run ``MAX_HEAVY_CALLS`` per process.  Light calls (search, a chat turn, a small add) never wait.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from memstrata.errors import Busy


class HeavyCalls:
    """How many heavy calls each user runs now, bounded by ``per_user``; thread-safe."""

    def __init__(self, per_user: int) -> None:
        self._per_user = per_user
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, user_id: str, what: str) -> Iterator[None]:
        """Hold one of ``user_id``'s heavy-call slots while the block runs (``what`` names the
        call in the error); ``Busy`` when all are taken.  The slot is given back however the block
        ends."""
        with self._lock:
            running = self._running.get(user_id, 0)
            if running >= self._per_user:
                raise Busy(
                    f"user {user_id!r} already runs {running} heavy calls (document uploads, "
                    f"large adds); {what} must wait until one ends",
                    hint=f"at most {self._per_user} at once per user: retry when one has ended",
                )
            self._running[user_id] = running + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running[user_id] - 1
                if left:
                    self._running[user_id] = left
                else:
                    del self._running[user_id]

    def running(self, user_id: str) -> int:
        """The heavy calls ``user_id`` runs now."""
        with self._lock:
            return self._running.get(user_id, 0)
