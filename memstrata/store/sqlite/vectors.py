"""Exact dense search over an in-memory, per-cube mirror of the stored vectors.

``CubeVectors`` holds one cube's vectors as a float32 matrix plus the columns search filters on
(status, tier, type, session, event_time), all kept in step with the database by *change
sequence*: every item write takes a new ``seq``, and ``apply()`` is fed the rows whose ``seq`` is
above the last one seen.  A refresh therefore costs one indexed query that usually returns nothing,
and picks up writes made by other processes on the same file.  Scores are dot products of unit
vectors (cosine), computed with one matrix-vector product: ~4 ms for 100k × 384 on two cores.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from memstrata.filters import Filters
from memstrata.model import ITEM_TYPES, STATUSES, TIERS

_STATUS = {s: i for i, s in enumerate(STATUSES)}
_TIER = {s: i for i, s in enumerate(TIERS)}
_TYPE = {s: i for i, s in enumerate(ITEM_TYPES)}

#: Row shape ``apply()`` takes: id, seq, status, tier, type, session_id, event_time, vector blob.
Row = tuple[str, int, str, str, str, "str | None", float, "bytes | None"]


class CubeVectors:
    """One cube's vectors and filter columns.  ``lock`` guards ``apply``; searches read snapshots."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_seq = 0
        self.dim = 0
        self.n = 0
        self.ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._sessions: dict[str | None, int] = {None: -1}
        self.matrix = np.zeros((0, 0), np.float32)
        self.status = np.zeros(0, np.int8)
        self.tier = np.zeros(0, np.int8)
        self.type = np.zeros(0, np.int8)
        self.session = np.zeros(0, np.int32)
        self.event_time = np.zeros(0, np.float64)
        self.has_vector = np.zeros(0, np.bool_)

    def _resize(self, capacity: int) -> None:
        def grow(old: npt.NDArray[Any], *shape: int) -> npt.NDArray[Any]:
            new = np.zeros(shape, old.dtype)
            new[: self.n] = old[: self.n]
            return new

        self.matrix = grow(self.matrix, capacity, self.dim)
        self.status = grow(self.status, capacity)
        self.tier = grow(self.tier, capacity)
        self.type = grow(self.type, capacity)
        self.session = grow(self.session, capacity)
        self.event_time = grow(self.event_time, capacity)
        self.has_vector = grow(self.has_vector, capacity)

    def apply(self, rows: Iterable[Row]) -> None:
        """Fold changed rows into the mirror (caller holds ``lock``)."""
        for item_id, seq, status, tier, type_, session, event_time, blob in rows:
            i = self._pos.get(item_id)
            if i is None:
                i = self._append(item_id, blob)
            self.status[i] = _STATUS[status]
            self.tier[i] = _TIER[tier]
            self.type[i] = _TYPE[type_]
            self.session[i] = self._sessions.setdefault(session, len(self._sessions))
            self.event_time[i] = event_time
            self.has_vector[i] = blob is not None
            if blob is not None:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] != self.dim:
                    # The cube was re-embedded with another model: start the mirror over.
                    raise _DimensionChanged
                self.matrix[i] = vector
            self.last_seq = max(self.last_seq, seq)

    def _append(self, item_id: str, blob: bytes | None) -> int:
        if self.dim == 0 and blob is not None:
            # The first vector fixes the width; rows seen before it had none.
            self.dim = len(blob) // 4
            self.matrix = np.zeros((self.matrix.shape[0], self.dim), np.float32)
        if self.n == self.matrix.shape[0]:
            self._resize(max(1024, 2 * self.n))
        i = self.n
        self.n += 1
        self.ids.append(item_id)
        self._pos[item_id] = i
        return i

    def mask(self, filters: Filters) -> npt.NDArray[Any]:
        """Rows passing every filter except metadata (checked by the store in SQL)."""
        n = self.n
        keep: npt.NDArray[Any] = self.has_vector[:n].copy()
        keep &= np.isin(self.status[:n], [_STATUS[s] for s in filters.statuses])
        if filters.tiers is not None:
            keep &= np.isin(self.tier[:n], [_TIER[t] for t in filters.tiers])
        if filters.types is not None:
            keep &= np.isin(self.type[:n], [_TYPE[t] for t in filters.types])
        if filters.session_id is not None:
            keep &= self.session[:n] == self._sessions.get(filters.session_id, -2)
        if filters.since is not None:
            keep &= self.event_time[:n] >= filters.since.timestamp()
        if filters.until is not None:
            keep &= self.event_time[:n] <= filters.until.timestamp()
        return keep

    def search(
        self,
        query: npt.NDArray[np.float32],
        filters: Filters,
        limit: int,
        allowed: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Best-first (id, cosine) among rows passing ``filters`` (and in ``allowed``, if given)."""
        if self.n == 0 or self.dim == 0 or limit <= 0:
            return []
        keep = self.mask(filters)
        if allowed is not None:
            keep &= np.isin(np.arange(self.n), [self._pos[a] for a in allowed if a in self._pos])
        candidates = np.flatnonzero(keep)
        if candidates.size == 0:
            return []
        if candidates.size == self.n:
            scores = self.matrix[: self.n] @ query
        else:
            scores = self.matrix[candidates] @ query
        k = min(limit, candidates.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        rows = top if candidates.size == self.n else candidates[top]
        return [(self.ids[r], float(scores[t])) for r, t in zip(rows, top, strict=True)]


class _DimensionChanged(Exception):
    """Internal: the mirror must be rebuilt from scratch."""


class VectorCache:
    """The process-wide set of ``CubeVectors``, refreshed from a row source before each search."""

    def __init__(self) -> None:
        self._cubes: dict[str, CubeVectors] = {}
        self._lock = threading.Lock()
        self._blas = ThreadpoolController()

    def single_threaded(self) -> Any:
        """A context in which BLAS runs on one thread (for the searches' matrix-vector products).

        A matrix-vector product is memory-bound: one thread is as fast as two here.  But BLAS
        worker threads keep spinning after a call, and on a 2-core machine they starve the
        embedder's OpenMP threads: e5 query latency went from 10 to 19 ms (p50) and 113 ms (p95)
        after a product over 100k vectors.  The limit is process-wide while held, so concurrent
        searches may briefly see each other's setting; that only moves time, never results.
        """
        return self._blas.limit(limits=1, user_api="blas")

    def refreshed(self, cube_id: str, fetch: Any) -> CubeVectors:
        """The cube's mirror after applying ``fetch(cube_id, last_seq)`` (an iterable of rows)."""
        with self._lock:
            cube = self._cubes.setdefault(cube_id, CubeVectors())
        with cube.lock:
            try:
                cube.apply(fetch(cube_id, cube.last_seq))
            except _DimensionChanged:
                cube = CubeVectors()
                cube.apply(fetch(cube_id, 0))
                with self._lock:
                    self._cubes[cube_id] = cube
        return cube

    def forget(self, cube_id: str) -> None:
        with self._lock:
            self._cubes.pop(cube_id, None)
