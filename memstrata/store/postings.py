"""A cache of term posting counts, shared by both engines' keyword channels."""

from __future__ import annotations

import threading
import time

#: Seconds a term's posting count is remembered for choosing query terms (see ``search.py``).
POSTINGS_TTL_S = 60.0
POSTINGS_CACHE_SIZE = 50_000


class PostingsCache:
    """Term posting counts with their age: ``(cube prefixes, term) → (count, monotonic time)``.

    Thread-safe.  Counts only choose which query terms to keep, so one a little stale is
    harmless; writes that remove content (erasure, cube deletion) clear it all the same.
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[tuple[str, ...], str], tuple[int, float]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[tuple[str, ...], str]) -> int | None:
        """The count remembered for ``key`` if younger than ``POSTINGS_TTL_S``, else None."""
        with self._lock:
            found = self._counts.get(key)
        if found is None or time.monotonic() - found[1] >= POSTINGS_TTL_S:
            return None
        return found[0]

    def put(self, key: tuple[tuple[str, ...], str], count: int) -> None:
        with self._lock:
            if len(self._counts) >= POSTINGS_CACHE_SIZE:
                self._counts.clear()  # crude, but bounded and rare
            self._counts[key] = (count, time.monotonic())

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
