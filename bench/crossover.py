"""Where the approximate dense index starts to pay: exact scan against HNSW, by cube size.

Run from the repository root, in the project's virtual environment, on an idle machine::

    python bench/scale.py --n 100000 --e5 /tmp/e5-100k.npz …   # once: keeps the e5 vectors
    python bench/crossover.py --e5 /tmp/e5-100k.npz --sizes 5000,10000,20000,50000,100000 \\
        --out bench/crossover.json

For each size N, one SQLite cube holds the first N turns of ``bench/core.py``'s stream with
their e5 vectors (from the cache ``bench/scale.py --e5`` keeps), written through the store; the
cache's e5 question vectors are the queries.  The dense channel alone (``vector_search``, no
embedding, no keyword channel) is timed over every query with ``limit`` 50 (what a search asks
of it: ``search_candidates``), exactly and through the index (built first; its build time is
reported), and the index's recall@10 and recall@50 against the exact scan are given (a hit
counts as found when its exact score is at least the exact k-th score: the stream repeats
turns, so many vectors tie).  The default ``vector_index_min_items`` is set where the index
becomes faster.

Past the cache's size (``--sizes …,1000000``), the missing vectors are made from the cached ones:
row i is row ``i mod cached`` plus Gaussian noise (σ ``--noise``, 0.02 per coordinate by default,
then normalised), its text the cached text with ``#i`` appended.  Such a cube keeps the real
vectors' clusters (e5 puts unrelated turns at cosine ~0.8) without an hour per 100k turns of
embedding; say so next to any figure it gives.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from scale import e5_rows

from memstrata.filters import Filters
from memstrata.model import Cube, MemoryItem, User, new_id
from memstrata.store.sqlite import SQLiteStore

CUBE = "crossover"
FP = "e5/384"
LIMIT = 50


def fill(path: Path, texts: list[str], vectors: np.ndarray) -> None:
    store = SQLiteStore(path)
    store.put_user(User("bench"))
    store.put_cube(Cube(CUBE, CUBE, owner="bench", embedder=FP))
    for start in range(0, len(texts), 1000):
        items = [MemoryItem(id=new_id(), cube_id=CUBE, text=t, user_id="bench")
                 for t in texts[start : start + 1000]]  # fmt: skip
        store.add_items(items, vectors[start : start + 1000], FP)
    store.close()


def timed(store: SQLiteStore, queries: np.ndarray) -> tuple[list[float], list[list[Any]]]:
    found, ms = [], []
    for q in queries:
        start = time.perf_counter()
        found.append(store.vector_search(q, [CUBE], Filters(), LIMIT))
        ms.append((time.perf_counter() - start) * 1000)
    return ms, found


def recall(exact: np.ndarray, found: list[Any], k: int) -> float:
    """Share of ``found[:k]`` whose exact score reaches the exact k-th score (ties count)."""
    kth = np.sort(exact)[::-1][k - 1] - 1e-6
    return float(sum(score >= kth for _, score in found[:k]) / k)


def measure(n: int, texts: list[str], vectors: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memstrata-crossover-") as scratch:
        path = Path(scratch) / "c.db"
        fill(path, texts[:n], vectors[:n])
        exact = SQLiteStore(path)
        indexed = SQLiteStore(path, vector_index_min_items=1, vector_index_threads=2)
        timed(exact, queries[:5])  # warm-up: the mirrors load
        start = time.perf_counter()
        indexed.build_vector_index(CUBE)
        build_s = time.perf_counter() - start
        timed(indexed, queries[:5])
        exact_ms, _ = timed(exact, queries)
        index_ms, found = timed(indexed, queries)
        scores = vectors[:n] @ queries.T
        figures = {
            "n": n,
            "index_build_s": build_s,
            "exact_p50_ms": statistics.median(exact_ms),
            "exact_p95_ms": float(np.percentile(exact_ms, 95)),
            "index_p50_ms": statistics.median(index_ms),
            "index_p95_ms": float(np.percentile(index_ms, 95)),
            "recall_at_10": float(
                np.mean([recall(scores[:, i], f, 10) for i, f in enumerate(found)])
            ),
            "recall_at_50": float(
                np.mean([recall(scores[:, i], f, 50) for i, f in enumerate(found)])
            ),
        }
        exact.close()
        indexed.close()
    return figures


def extended(texts: list[str], vectors: np.ndarray, n: int, noise: float) -> np.ndarray:
    """``vectors`` grown to ``n`` rows (and ``texts`` in place) as the module docstring says."""
    cached = len(vectors)
    if n <= cached:
        return vectors
    rng = np.random.default_rng(0)
    out = np.empty((n, vectors.shape[1]), np.float32)
    out[:cached] = vectors
    for start in range(cached, n, cached):
        stop = min(n, start + cached)
        block = vectors[: stop - start] + rng.normal(0, noise, (stop - start, vectors.shape[1]))
        out[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
        texts.extend(f"{t} #{start + i}" for i, t in enumerate(texts[: stop - start]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--e5", type=Path, required=True, help="bench/scale.py's e5 cache (.npz)")
    parser.add_argument("--sizes", default="5000,10000,20000,50000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--noise", type=float, default=0.02, help="σ of the made-up vectors")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    cached = min(max(sizes), len(np.load(args.e5)["vectors"]))
    texts, vectors, queries = e5_rows(args.e5, cached, args.queries)
    vectors = extended(texts, np.ascontiguousarray(vectors, np.float32), max(sizes), args.noise)
    queries = np.ascontiguousarray(queries, np.float32)
    print(f"{'n':>7} {'build s':>8} {'exact p50':>10} {'p95':>7} {'index p50':>10} {'p95':>7} "
          f"{'R@10':>6} {'R@50':>6}", flush=True)  # fmt: skip
    rows = []
    for n in sizes:
        f = measure(n, texts, vectors, queries)
        rows.append(f)
        print(f"{n:>7} {f['index_build_s']:>8.1f} {f['exact_p50_ms']:>10.2f} {f['exact_p95_ms']:>7.2f}"
              f" {f['index_p50_ms']:>10.2f} {f['index_p95_ms']:>7.2f} {f['recall_at_10']:>6.3f}"
              f" {f['recall_at_50']:>6.3f}", flush=True)  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps({"limit": LIMIT, "sizes": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
