"""An approximate (HNSW, usearch) index over one cube's vectors, beside the exact mirror.

The exact mirror (``vectors.CubeVectors``) stays the truth: the index only proposes candidates,
which are scored again exactly against the mirror's current vectors.  What keeps a search right
whatever the index's age:

* The index holds the vectors of the cube's rows as they were at its ``watermark`` (a change
  sequence number).  Rows changed after it, and the ``stale`` rows (their vector changed after
  the row was indexed, recorded at the index's last extension), are scanned exactly and merged.
  So an index file older than the database (a crash, another process's writes) costs time,
  never results.
* Deleted, archived or erased rows are dropped by the mirror's filters after the index proposed
  them; erasure also deletes the cube's index files (``drop``), so an erased item's vector does
  not outlive it on disk, and the next build starts over.
* Identical vectors (repeated turns: "thanks!", "lol") are indexed once, the other rows listed
  as ``twins`` of that key: HNSW graphs lose recall on many exact duplicates (over the 100k e5
  benchmark cube, where 31 % of vectors repeat, recall@10 was 0.94 with them and 0.98 without at
  ``ef`` 128; docs/benchmarks.md).

Keys are the rows' ``rid``s (stable across processes), so one process (a worker) can build the
index while others (servers) load it: ``<db>.vindex/<cube hash>.<dim>.npz`` names the current
generation's graph file (``….<gen>.usearch``), and is replaced by a rename after the graph file
is complete.  A reader that finds a newer ``.npz`` loads it (memory-mapped).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: HNSW parameters, chosen on the 100k e5 benchmark cube (docs/benchmarks.md).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 256
#: key rids with twins (sorted), where each key's twins start in ``rids``, and the twins' rids
Twins = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]

#: A full rebuild instead of an extension once this share of the indexed rows went stale.
STALE_SHARE = 0.05


@dataclass
class AnnIndex:
    """One cube's graph and what it covers.  Never changed once published (``extend`` copies)."""

    graph: Any  # usearch.index.Index
    dim: int
    #: the change sequence the graph is current to
    watermark: int
    #: the highest rid indexed: rows changed after ``watermark`` with a higher rid are new
    max_rid: int
    #: rids of rows whose vector changed after they were indexed (scanned exactly)
    stale: npt.NDArray[np.int64]
    #: key rid -> rids with the same vector (CSR: ``twin_keys`` sorted, ``twin_start`` offsets)
    twin_keys: npt.NDArray[np.int64]
    twin_start: npt.NDArray[np.int64]
    twin_rids: npt.NDArray[np.int64]
    generation: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def candidates(self, query: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """Rids of up to ``count`` nearest keys, with their twins."""
        # usearch shares its per-thread search contexts between Python threads: one at a time.
        with self.lock:
            keys = np.asarray(self.graph.search(query, count, threads=1).keys, np.int64)
        if self.twin_keys.size == 0:
            return keys
        at = np.searchsorted(self.twin_keys, keys)
        at[at >= self.twin_keys.size] = 0
        hit = at[self.twin_keys[at] == keys]
        if hit.size == 0:
            return keys
        extra = [self.twin_rids[self.twin_start[i] : self.twin_start[i + 1]] for i in hit]
        return np.concatenate([keys, *extra])


def build(
    rids: npt.NDArray[np.int64],
    matrix: npt.NDArray[np.float32],
    watermark: int,
    threads: int,
) -> AnnIndex:
    """A fresh index over ``matrix`` (rows keyed by ``rids``), identical rows indexed once."""
    from usearch.index import Index

    dim = matrix.shape[1]
    graph = Index(
        ndim=dim, metric="cos", dtype="f16", connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH,
    )  # fmt: skip
    keys, twins = _dedupe(rids, matrix)
    if keys.size:
        graph.add(rids[keys], matrix[keys], threads=threads)
    return AnnIndex(graph, dim, watermark, int(rids.max(initial=0)), np.zeros(0, np.int64), *twins)


def extend(
    index: AnnIndex,
    rids: npt.NDArray[np.int64],
    matrix: npt.NDArray[np.float32],
    watermark: int,
    threads: int,
) -> AnnIndex:
    """``index`` plus the rows changed since its watermark (``rids``/``matrix``), as a copy.

    New rows (rid above ``max_rid``) join the graph; changed ones become ``stale``.
    """
    new = rids > index.max_rid
    graph = index.graph.copy()
    _tune(graph)
    keys, twins = _dedupe(rids[new], matrix[new])
    if keys.size:
        graph.add(rids[new][keys], matrix[new][keys], threads=threads)
    stale = np.union1d(index.stale, rids[~new])
    twin_keys, twin_start, twin_rids = _merge_twins(
        (index.twin_keys, index.twin_start, index.twin_rids), twins
    )
    return AnnIndex(
        graph, index.dim, watermark, max(index.max_rid, int(rids.max(initial=0))), stale,
        twin_keys, twin_start, twin_rids, generation=index.generation,
    )  # fmt: skip


def _tune(graph: Any) -> None:
    # A restored or copied graph searches with usearch's default ``ef`` (64), not ours.
    graph.expansion_search = EXPANSION_SEARCH


def _dedupe(
    rids: npt.NDArray[np.int64], matrix: npt.NDArray[np.float32]
) -> tuple[npt.NDArray[np.int64], Twins]:
    """Positions of the first row of each distinct vector, and the others as CSR twins."""
    empty = np.zeros(0, np.int64)
    none = (empty, np.zeros(1, np.int64), empty)
    if rids.size == 0:
        return empty, none
    prints = _fingerprints(matrix)
    _, first, group = np.unique(prints, return_index=True, return_inverse=True)
    owner_pos = first[group.ravel()]
    others = np.flatnonzero(owner_pos != np.arange(rids.size))
    # Equal fingerprints of different vectors (a 64-bit collision) must not hide a row.
    same = [bool(np.array_equal(matrix[i], matrix[owner_pos[i]])) for i in others.tolist()]
    others = others[np.asarray(same, np.bool_)] if others.size else others
    keys = np.setdiff1d(np.arange(rids.size), others).astype(np.int64)
    if others.size == 0:
        return keys, none
    owner = rids[owner_pos[others]]
    order = np.argsort(owner, kind="stable")
    owner, twin_rids = owner[order], rids[others][order]
    twin_keys, counts = np.unique(owner, return_counts=True)
    twin_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return keys, (twin_keys.astype(np.int64), twin_start, twin_rids.astype(np.int64))


def _fingerprints(matrix: npt.NDArray[np.float32], chunk: int = 16384) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each row's bytes, computed in chunks (no copy of the whole matrix)."""
    width = matrix.shape[1]
    weights = np.random.default_rng(0).integers(1, 2**63, size=width, dtype=np.uint64) | 1
    out = np.empty(matrix.shape[0], np.uint64)
    for start in range(0, matrix.shape[0], chunk):
        words = np.ascontiguousarray(matrix[start : start + chunk]).view(np.uint32)
        with np.errstate(over="ignore"):
            out[start : start + chunk] = (words.astype(np.uint64) * weights).sum(axis=1)
    return out


def _merge_twins(a: Twins, b: Twins) -> Twins:
    """Two CSR twin tables as one (their keys are disjoint: ``b``'s keys are new rows)."""
    if b[0].size == 0:
        return a
    if a[0].size == 0:
        return b
    pairs = [(k, t[1][i], t[1][i + 1], t[2]) for t in (a, b) for i, k in enumerate(t[0].tolist())]
    pairs.sort(key=lambda p: p[0])
    keys = np.array([p[0] for p in pairs], np.int64)
    chunks = [p[3][p[1] : p[2]] for p in pairs]
    start = np.concatenate([[0], np.cumsum([c.size for c in chunks])]).astype(np.int64)
    return keys, start, np.concatenate(chunks).astype(np.int64)


# -- files ---------------------------------------------------------------------------------


def _stem(folder: Path, cube_id: str, dim: int) -> Path:
    # Cube ids may hold characters a file name cannot: name files by a hash of the id.
    digest = hashlib.sha256(cube_id.encode()).hexdigest()[:24]
    return folder / f"{digest}.{dim}"


def save(index: AnnIndex, folder: Path, cube_id: str) -> None:
    """Write ``index`` as the next generation for ``cube_id`` and remove the previous one."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = _stem(folder, cube_id, index.dim)
    previous = index.generation
    # A new name each time (other processes may have the current file memory-mapped), written
    # aside and renamed into place: a reader never sees a half-written graph.
    index.generation = max(previous + 1, time.time_ns())
    graph_tmp = Path(f"{stem}.{index.generation}.usearch.tmp")
    index.graph.save(str(graph_tmp))
    os.replace(graph_tmp, f"{stem}.{index.generation}.usearch")
    meta_tmp = Path(f"{stem}.npz.tmp")
    with meta_tmp.open("wb") as out:
        np.savez(
            out, dim=index.dim, watermark=index.watermark, max_rid=index.max_rid,
            stale=index.stale, twin_keys=index.twin_keys, twin_start=index.twin_start,
            twin_rids=index.twin_rids, generation=index.generation,
        )  # fmt: skip
        out.flush()
        os.fsync(out.fileno())
    os.replace(meta_tmp, f"{stem}.npz")
    Path(f"{stem}.{previous}.usearch").unlink(missing_ok=True)


def stamp(folder: Path, cube_id: str, dim: int) -> tuple[int, int] | None:
    """What identifies the saved index's current version (mtime, size), or None if absent."""
    try:
        found = os.stat(f"{_stem(folder, cube_id, dim)}.npz")
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def saved_watermark(folder: Path, cube_id: str, dim: int) -> int | None:
    """The saved index's watermark (its small ``.npz`` only), or None when absent or unreadable."""
    try:
        with np.load(f"{_stem(folder, cube_id, dim)}.npz") as meta:
            return int(meta["watermark"])
    except (OSError, KeyError, ValueError):
        return None


def load(folder: Path, cube_id: str, dim: int, *, view: bool) -> AnnIndex | None:
    """The saved index (memory-mapped with ``view``), or None when absent or unreadable."""
    from usearch.index import Index

    stem = _stem(folder, cube_id, dim)
    try:
        with np.load(f"{stem}.npz") as meta:
            fields = {k: meta[k] for k in meta.files}
        generation = int(fields["generation"])
        graph = Index.restore(f"{stem}.{generation}.usearch", view=view)
    except (OSError, KeyError, ValueError, RuntimeError):
        # Half-written by a crash, or replaced by a newer generation while reading: no index
        # now; the next build writes a whole one.
        return None
    if graph is None or int(fields["dim"]) != dim:
        return None
    _tune(graph)
    return AnnIndex(
        graph, dim, int(fields["watermark"]), int(fields["max_rid"]), fields["stale"],
        fields["twin_keys"], fields["twin_start"], fields["twin_rids"], generation,
    )  # fmt: skip


def drop(folder: Path, cube_id: str) -> None:
    """Remove every saved index of ``cube_id`` (all widths and generations)."""
    digest = _stem(folder, cube_id, 0).name.split(".")[0]
    for path in folder.glob(f"{digest}.*"):
        path.unlink(missing_ok=True)
