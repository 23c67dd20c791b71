"""The dense channel at scale on both engines: PostgreSQL (pgvector HNSW) beside SQLite (exact scan).

Run from the repository root, in the project's virtual environment, on an idle machine::

    python bench/scale.py --postgres postgresql://postgres@127.0.0.1:15432/postgres --n 100000
    python bench/scale.py --postgres … --n 20000 --e5 /tmp/e5-20k.npz --out bench/scale-e5-20k.json

One cube of N synthetic items is written through each store's ``add_items`` in batches of
``--batch`` (a new PostgreSQL database, made and dropped by the script; a temporary SQLite file):
short texts from a fixed vocabulary and random unit vectors of width ``--dim`` (384, e5's), from
a fixed seed, so both engines hold the same rows.  Random vectors have no cluster structure: the
hardest case for an approximate index's recall, far below real embeddings'.  With ``--e5 FILE``
the items are instead the first N turns of ``bench/core.py``'s conversation stream with their e5
vectors, and the queries its questions, embedded by e5 (slow: about 32 turns/s here) and kept in
FILE for the next run.  Then ``--queries`` queries are searched (``vector_search``, top 10, the
default filters) on each engine.

Figures: ``write`` (items/s through ``add_items``, the HNSW index maintained as rows arrive on
PostgreSQL; its HNSW index is built in bulk when the cube reaches 10,000 vectors), ``search p50/p95`` (ms, ``vector_search`` alone), ``recall@10`` of PostgreSQL against
the exact top 10 (numpy over the same vectors), ``disk`` (PostgreSQL: the database's size; SQLite:
the file and its WAL) and the size of the HNSW index.  A search as a user sees it adds the query
embedding (e5: about 6 ms here, ``bench/core.py``) and the keyword channel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.filters import Filters
from memstrata.model import Cube, MemoryItem, User, new_id
from memstrata.store.base import Store
from memstrata.store.sqlite import SQLiteStore

WORDS = ("garden river piano bicycle lantern coffee winter harbor violin meadow canyon"
         " orchard falcon pepper marble velvet thunder saffron glacier compass").split()  # fmt: skip
FP = "bench/{dim}"


def rows(n: int, dim: int, seed: int = 7) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    picks = rng.integers(0, len(WORDS), (n, 6))
    return [" ".join(WORDS[i] for i in p) for p in picks], vectors


def e5_rows(cache: Path, n: int, count: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The first ``n`` turns of ``core.conversation`` with their e5 vectors, and ``count`` of
    its questions' e5 query vectors; computed once and kept in ``cache`` (.npz)."""
    from itertools import islice

    sys.path.insert(0, str(Path(__file__).parent))
    from core import conversation, passage_text, questions

    from memstrata.config import Settings
    from memstrata.embed import make_embedder

    texts = [passage_text(m) for m in islice(conversation(), n)]
    if cache.exists():
        kept = np.load(cache)
        if len(kept["vectors"]) >= n and len(kept["queries"]) >= count:
            return texts, kept["vectors"][:n], kept["queries"][:count]
    embedder = make_embedder("e5", Settings.load(environ={}))
    print(f"embedding {n:,} turns with e5", file=sys.stderr)
    vectors = np.asarray(embedder.embed_passages(texts), np.float32)
    queries = np.asarray([embedder.embed_query(q) for q in questions(count)], np.float32)
    np.savez(cache, vectors=vectors, queries=queries)
    return texts, vectors, queries


def fill(store: Store, texts: list[str], vectors: np.ndarray, batch: int, dim: int) -> float:
    """Write the cube; items/s."""
    store.put_user(User("bench"))
    store.put_cube(Cube("scale", "scale", owner="bench", embedder=FP.format(dim=dim)))
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        chunk = slice(start, start + batch)
        items = [MemoryItem(id=new_id(), cube_id="scale", text=t, user_id="bench")
                 for t in texts[chunk]]  # fmt: skip
        store.add_items(items, vectors[chunk], FP.format(dim=dim))
        if sys.stderr.isatty():
            print(f"\r  {start + len(items):,} / {len(texts):,}", end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return len(texts) / (time.perf_counter() - started)


def timed(
    search: Callable[[np.ndarray], list[Any]], queries: np.ndarray
) -> tuple[list[float], list[list[str]]]:
    search(queries[0])  # warm
    times, found = [], []
    for q in queries:
        started = time.perf_counter()
        hits = search(q)
        times.append((time.perf_counter() - started) * 1000)
        found.append([h[0] for h in hits])
    return times, found


def figures(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(times, 50)), 2),
            "p95_ms": round(float(np.percentile(times, 95)), 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="DSN of a server (a database is made)")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--e5", type=Path, help="real e5 vectors of core.py's turns, cached here")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import psycopg

    from memstrata.store.postgres import PostgresStore

    if args.e5:
        texts, vectors, queries = e5_rows(args.e5, args.n, args.queries)
        args.dim = vectors.shape[1]
    else:
        texts, vectors = rows(args.n, args.dim)
        queries = rows(args.queries, args.dim, seed=11)[1]
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    result: dict[str, Any] = {"n": args.n, "dim": args.dim, "queries": args.queries,
                              "cpus": os.cpu_count()}  # fmt: skip

    name = f"bench_scale_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = args.postgres.rsplit("/", 1)[0] + f"/{name}"
    try:
        pg = PostgresStore(dsn)
        print(f"PostgreSQL: writing {args.n:,} items", file=sys.stderr)
        rate = fill(pg, texts, vectors, args.batch, args.dim)
        ids = [r[0] for r in pg.rows("SELECT id FROM items ORDER BY seq")]
        position = {item_id: i for i, item_id in enumerate(ids)}
        times, found = timed(lambda q: pg.vector_search(q, ["scale"], Filters(), 10), queries)
        recall = np.mean([len({position[i] for i in hits} & set(exact[k])) / 10
                          for k, hits in enumerate(found)])  # fmt: skip
        size = pg.row("SELECT pg_database_size(current_database())")[0]
        index = pg.row(f"SELECT pg_relation_size('items_hnsw_{args.dim}')")[0]
        plan = pg.rows(
            f"EXPLAIN SELECT id, (i.vector::vector({args.dim})) <=> %s::real[]::vector({args.dim}) "
            f"AS distance FROM items i WHERE i.dim = {args.dim} AND i.cube_id = 'scale' "
            "ORDER BY distance LIMIT 10",
            (queries[0].tolist(),),
        )
        result["postgres"] = {"write_items_per_s": round(rate), **figures(times),
                              "recall_at_10": round(float(recall), 4),
                              "disk_mb": round(size / 1e6), "hnsw_index_mb": round(index / 1e6),
                              "uses_hnsw": any("items_hnsw" in r[0] for r in plan)}  # fmt: skip
        pg.close()
    finally:
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(json.dumps(result["postgres"]), file=sys.stderr)

    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "scale.db"
            lite = SQLiteStore(path)
            print(f"SQLite: writing {args.n:,} items", file=sys.stderr)
            rate = fill(lite, texts, vectors, args.batch, args.dim)
            times, _ = timed(lambda q: lite.vector_search(q, ["scale"], Filters(), 10), queries)
            disk = sum(p.stat().st_size for p in Path(folder).glob("scale.db*"))
            result["sqlite"] = {"write_items_per_s": round(rate), **figures(times),
                                "recall_at_10": 1.0, "disk_mb": round(disk / 1e6)}  # fmt: skip
            lite.close()
        print(json.dumps(result["sqlite"]), file=sys.stderr)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
