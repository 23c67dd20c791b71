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
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from memstrata.filters import Filters
from memstrata.model import ITEM_TYPES, STATUSES, TIERS
from memstrata.store.sqlite import ann
from memstrata.store.sqlite.ann import AnnIndex

_STATUS = {s: i for i, s in enumerate(STATUSES)}
_TIER = {s: i for i, s in enumerate(TIERS)}
_TYPE = {s: i for i, s in enumerate(ITEM_TYPES)}

#: Row shape ``apply()`` takes: id, rid, seq, status, tier, type, session_id, event_time, vector.
Row = tuple[str, int, int, str, str, str, "str | None", float, "bytes | None"]

#: Below this share of the cube passing the filters, the exact scan of those rows is cheaper
#: than asking the approximate index for enough candidates.
ANN_MIN_SHARE = 0.05
#: From this share of the cube passing the filters, the exact scan scores every row and picks
#: the passing ones' scores, instead of copying the passing rows first.
FULL_PRODUCT_SHARE = 1 / 3


class CubeVectors:
    """One cube's vectors and filter columns.  ``lock`` guards ``apply``; searches read snapshots."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_seq = 0
        self.dim = 0
        self.n = 0
        self.ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._pos_of_rid: dict[int, int] = {}
        #: the approximate index in use (``ann.AnnIndex``), and its stale rows' positions
        self.ann: AnnIndex | None = None
        self._ann_stale = np.zeros(0, np.int64)
        self._sessions: dict[str | None, int] = {None: -1}
        self.matrix = np.zeros((0, 0), np.float32)
        self.status = np.zeros(0, np.int8)
        self.tier = np.zeros(0, np.int8)
        self.type = np.zeros(0, np.int8)
        self.session = np.zeros(0, np.int32)
        self.event_time = np.zeros(0, np.float64)
        self.has_vector = np.zeros(0, np.bool_)
        self.rid = np.zeros(0, np.int64)
        #: the change sequence at which this mirror first saw each row's current vector
        self.vector_seq = np.zeros(0, np.int64)
        #: the last ``passing`` answer: (its key, the mask, the passing rows); see ``passing``
        self._passing: tuple[tuple[Any, ...], npt.NDArray[Any], npt.NDArray[Any]] | None = None

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
        self.rid = grow(self.rid, capacity)
        self.vector_seq = grow(self.vector_seq, capacity)

    def apply(self, rows: Iterable[Row]) -> None:
        """Fold changed rows into the mirror (caller holds ``lock``)."""
        for item_id, rid, seq, status, tier, type_, session, event_time, blob in rows:
            i = self._pos.get(item_id)
            if i is None:
                i = self._append(item_id, rid, blob)
            self.status[i] = _STATUS[status]
            self.tier[i] = _TIER[tier]
            self.type[i] = _TYPE[type_]
            self.session[i] = self._sessions.setdefault(session, len(self._sessions))
            self.event_time[i] = event_time
            if blob is not None:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] != self.dim:
                    # The cube was re-embedded with another model: start the mirror over.
                    raise _DimensionChanged
                if not (self.has_vector[i] and np.array_equal(self.matrix[i], vector)):
                    self.vector_seq[i] = seq
                self.matrix[i] = vector
            self.has_vector[i] = blob is not None
            self.last_seq = max(self.last_seq, seq)

    def _append(self, item_id: str, rid: int, blob: bytes | None) -> int:
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
        self._pos_of_rid[rid] = i
        self.rid[i] = rid
        return i

    def mask(self, filters: Filters) -> npt.NDArray[Any]:
        """Rows passing every filter except metadata (checked by the store in SQL)."""
        n = self.n
        keep: npt.NDArray[Any] = self.has_vector[:n].copy()
        # A code's membership read from a table of all codes: one gather per row, where
        # ``np.isin`` sorts (1M rows: 1.9 ms for the statuses alone).
        keep &= _among(_STATUS, filters.statuses)[self.status[:n]]
        if filters.tiers is not None:
            keep &= _among(_TIER, filters.tiers)[self.tier[:n]]
        if filters.types is not None:
            keep &= _among(_TYPE, filters.types)[self.type[:n]]
        if filters.session_id is not None:
            keep &= self.session[:n] == self._sessions.get(filters.session_id, -2)
        if filters.since is not None:
            keep &= self.event_time[:n] >= filters.since.timestamp()
        if filters.until is not None:
            keep &= self.event_time[:n] <= filters.until.timestamp()
        return keep

    def passing(self, filters: Filters) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """``mask(filters)`` and the positions of its rows, shared by every search with the
        same filters until the mirror changes (callers must not modify them).

        A search asks two or three dense passes with one set of filters, and the searches after
        it mostly the same set again; at 1M rows the mask and its positions cost 2.3 ms per
        pass.  The key holds ``last_seq``, which every ``apply`` raises: an answer computed
        while rows were being applied is filed under the key from before, never asked again.
        """
        key = (self.last_seq, self.n, filters.statuses, filters.tiers, filters.types,
               filters.session_id, filters.since, filters.until)  # fmt: skip
        kept = self._passing
        if kept is not None and kept[0] == key:
            return kept[1], kept[2]
        keep = self.mask(filters)
        candidates = np.flatnonzero(keep)
        self._passing = (key, keep, candidates)
        return keep, candidates

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
        keep, candidates = self.passing(filters)
        if allowed is not None:
            keep = keep & np.isin(
                np.arange(keep.size), [self._pos[a] for a in allowed if a in self._pos]
            )
            candidates = np.flatnonzero(keep)
        if candidates.size == 0:
            return []
        ann = self.ann
        if ann is not None and allowed is None and candidates.size >= ANN_MIN_SHARE * self.n:
            found = self._approximate(ann, query, keep, candidates.size, limit)
            if found is not None:
                return found
        if candidates.size == self.n:
            scores = self.matrix[: self.n] @ query
        elif candidates.size >= FULL_PRODUCT_SHARE * self.n:
            # ``matrix[candidates]`` copies those rows before the product reads them again:
            # past a third of the cube, the product over every row (contiguous) and a pick of
            # the candidates' scores reads less (10k rows of which 9.9k pass: 3.6 -> 1.0 ms).
            scores = (self.matrix[: self.n] @ query)[candidates]
        else:
            scores = self.matrix[candidates] @ query
        return self._best(candidates, scores, limit, everything=candidates.size == self.n)

    def _best(
        self,
        rows: npt.NDArray[Any],
        scores: npt.NDArray[Any],
        limit: int,
        *,
        everything: bool = False,
    ) -> list[tuple[str, float]]:
        """The ``limit`` best of ``rows`` by ``scores`` (``everything``: rows are all rows)."""
        k = min(limit, rows.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        picked = top if everything else rows[top]
        return [(self.ids[r], float(scores[t])) for r, t in zip(picked, top, strict=True)]

    def _approximate(
        self,
        ann: AnnIndex,
        query: npt.NDArray[np.float32],
        keep: npt.NDArray[Any],
        passing: int,
        limit: int,
    ) -> list[tuple[str, float]] | None:
        """The best rows from the index's candidates plus every row it does not cover, all
        scored exactly; None when too few candidates pass the filters (scan exactly)."""
        # The rows the mask covers: ``apply`` may append more meanwhile (this reads unlocked).
        n = keep.size
        # Ask for enough candidates that ``limit`` of them should pass the filters.
        want = min(n, int(max(2 * limit, 10) * n / passing))
        proposed = [self._pos_of_rid.get(r) for r in ann.candidates(query, want).tolist()]
        found = np.fromiter((p for p in proposed if p is not None and p < n), np.int64)
        # Rows the index does not hold as they are now: changed after its watermark, or stale.
        fresh = np.flatnonzero(self.vector_seq[:n] > ann.watermark)
        stale = self._ann_stale
        rows = np.unique(np.concatenate([found, fresh, stale[stale < n]]))
        rows = rows[keep[rows]]
        if rows.size < min(limit, passing):
            return None
        return self._best(rows, self.matrix[rows] @ query, limit)

    def attach(self, ann: AnnIndex | None) -> None:
        """Search with ``ann`` from now on (None: exactly); caller holds ``lock``."""
        self.ann = ann
        if ann is None:
            self._ann_stale = np.zeros(0, np.int64)
            return
        stale = (self._pos_of_rid.get(r) for r in ann.stale.tolist())
        self._ann_stale = np.fromiter((p for p in stale if p is not None), np.int64)


def _among(codes: dict[str, int], wanted: Sequence[str]) -> npt.NDArray[np.bool_]:
    """A table over every code of ``codes``: True for the codes of ``wanted``."""
    table = np.zeros(len(codes), np.bool_)
    table[[codes[w] for w in wanted]] = True
    return table


class _DimensionChanged(Exception):
    """Internal: the mirror must be rebuilt from scratch."""


class VectorCache:
    """The process-wide set of ``CubeVectors``, refreshed from a row source before each search.

    With ``index_min_items`` > 0, cubes of at least that many rows are searched through an
    approximate index (``ann``) once one is built (``build_index``: a background task, never a
    search or an add).  With a ``folder`` the index is saved there and loaded by every process
    on the database; without one (an in-memory database) it lives in this process only.
    """

    def __init__(
        self, folder: Path | None = None, *, index_min_items: int = 0, threads: int = 1
    ) -> None:
        self._cubes: dict[str, CubeVectors] = {}
        self._lock = threading.Lock()
        self._blas = ThreadpoolController()
        self._folder = folder
        self.index_min_items = index_min_items
        self._threads = threads
        #: per cube, the saved index's stamp when this process last looked (``ann.stamp``)
        self._stamps: dict[str, tuple[int, int] | None] = {}
        self._build_lock = threading.Lock()

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
        """The cube's mirror after applying ``fetch(cube_id, last_seq)`` (an iterable of rows),
        with the newest saved index attached when the cube is large enough."""
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
                    self._stamps.pop(cube_id, None)
            if self._folder is not None and self._large(cube):
                self._attach_saved(cube_id, cube)
        return cube

    def _large(self, cube: CubeVectors) -> bool:
        return 0 < self.index_min_items <= cube.n and cube.dim > 0

    def _attach_saved(self, cube_id: str, cube: CubeVectors) -> None:
        """Attach the saved index if it changed since this process last looked (one ``stat``)."""
        assert self._folder is not None
        found = ann.stamp(self._folder, cube_id, cube.dim)
        if found == self._stamps.get(cube_id, ()):
            return
        self._stamps[cube_id] = found
        if found is None:
            cube.attach(None)
            return
        loaded = ann.load(self._folder, cube_id, cube.dim, view=True)
        # An unreadable file (damaged, or replaced while read) leaves the index in use, if any.
        if loaded is not None and (cube.ann is None or loaded.watermark >= cube.ann.watermark):
            cube.attach(loaded)

    def build_index(self, cube_id: str, fetch: Any) -> int:
        """Build or extend the cube's approximate index; returns how many rows it took in.

        Nothing happens below ``index_min_items`` rows or when the index is current.  A full
        build replaces an index whose stale rows passed ``ann.STALE_SHARE``, or of another width.
        """
        cube = self.refreshed(cube_id, fetch)
        if not self._large(cube):
            return 0
        with self._build_lock:
            with cube.lock:
                n, watermark, current = cube.n, cube.last_seq, cube.ann
                if current is not None and current.dim != cube.dim:
                    current = None
                if current is not None and current.watermark >= watermark:
                    return 0
                take = cube.has_vector[:n].copy()
                if current is not None:
                    take &= cube.vector_seq[:n] > current.watermark
                    if current.stale.size + take.sum() > ann.STALE_SHARE * n:
                        take, current = cube.has_vector[:n].copy(), None
                rows = np.flatnonzero(take)
                rids = cube.rid[rows].copy()
                matrix = cube.matrix
            # Outside the lock: searches go on.  A vector changed meanwhile has a newer
            # vector_seq than ``watermark``, so it is scanned exactly whatever went in here.
            vectors = matrix[:n] if rows.size == n else matrix[rows]
            if current is None:
                built = ann.build(rids, vectors, watermark, self._threads)
                if cube.ann is not None:
                    built.generation = cube.ann.generation
            else:
                built = ann.extend(current, rids, vectors, watermark, self._threads)
            if self._folder is not None:
                ann.save(built, self._folder, cube_id)
            with cube.lock:
                cube.attach(built)
                if self._folder is not None:
                    self._stamps[cube_id] = ann.stamp(self._folder, cube_id, cube.dim)
            if self._erased_meanwhile(cube_id, cube, rows, fetch):
                return 0
        return int(rows.size)

    def _erased_meanwhile(self, cube_id: str, cube: CubeVectors, rows: Any, fetch: Any) -> bool:
        """Whether a row just indexed lost its vector (erased) while the index was built; if
        so the index is dropped, files and all, so that the vector does not outlive it.

        Erasure deletes the index files after its transaction commits.  Were that before this
        build saved its files, the refresh here sees the erasure and drops them; were it
        after, the files are gone already.
        """
        again = self._cubes.get(cube_id)
        if again is not cube:
            return False  # the mirror was dropped (erasure in this process): files are gone
        with cube.lock:
            try:
                cube.apply(fetch(cube_id, cube.last_seq))
                if bool(cube.has_vector[rows].all()):
                    return False
            except _DimensionChanged:
                pass  # re-embedded meanwhile: this index is of the old vectors
            cube.attach(None)
        if self._folder is not None:
            ann.drop(self._folder, cube_id)
            self._stamps.pop(cube_id, None)
        return True

    def watermark(self, cube_id: str) -> int | None:
        """The change sequence the cube's index (in this process, else saved) is current to."""
        with self._lock:
            cube = self._cubes.get(cube_id)
        if cube is not None and cube.ann is not None:
            return cube.ann.watermark
        if self._folder is None or cube is None or cube.dim == 0:
            return None
        return ann.saved_watermark(self._folder, cube_id, cube.dim)

    def forget(self, cube_id: str, *, drop_index: bool = False) -> None:
        """Drop the cube's mirror; with ``drop_index`` its saved index files too (erasure)."""
        with self._lock:
            self._cubes.pop(cube_id, None)
            self._stamps.pop(cube_id, None)
        if drop_index and self._folder is not None:
            with self._build_lock:
                ann.drop(self._folder, cube_id)
