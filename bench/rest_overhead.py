"""What the REST layer adds to a search: the same question over HTTP and in process, p50.

Run from the repository root, in the project's virtual environment, on a copy of a
``bench/core.py`` database (only the copy is touched)::

    python bench/rest_overhead.py --db /tmp/rest/e5.db --from /tmp/bench/e5.db --out rest.json

``--from`` is copied to ``--db`` and its ``--user`` (default ``bench``) gets a key
(``bench/load.py``'s ``prepare_copy``); ``memstrata --db DB serve`` then runs in a child process
(``load.serving``) while this process opens the same file as a ``MemoryOS`` with the same
settings.  Question by question (``core.questions``), the search (``top_k`` 10, every cube the
user may read) is asked of both twice, back to back, and the second of each pair is timed: the
first puts the query vector in each process's embedder cache, so the two timed calls differ by
what lies between a client and ``MemoryOS.search`` (``httpx`` on loopback, the server's
routing, authentication, validation and the JSON of the hits), not by the model.  The order of
the two alternates every question.  Figures: p50/p95 of each and the p50 of the per-question
differences (``overhead_p50_ms``).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memstrata import MemoryOS
from memstrata.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import questions
from load import copy_database, prepare_copy, serving

TOP_K = 10


def pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values, np.float64), q)), 3)


def measure(memory: MemoryOS, client: Client, user: str, asked: list[str]) -> dict[str, Any]:
    """Per question, the second of two searches in process and over HTTP (see the module doc)."""

    def local(q: str) -> float:
        memory.search(q, user_id=user, top_k=TOP_K)
        start = time.perf_counter()
        memory.search(q, user_id=user, top_k=TOP_K)
        return (time.perf_counter() - start) * 1000

    def remote(q: str) -> float:
        client.search(q, top_k=TOP_K)
        start = time.perf_counter()
        client.search(q, top_k=TOP_K)
        return (time.perf_counter() - start) * 1000

    inproc, http = [], []
    for n, q in enumerate(asked):
        if n % 2:
            http.append(remote(q))
            inproc.append(local(q))
        else:
            inproc.append(local(q))
            http.append(remote(q))
    return {
        "questions": len(asked),
        "in_process_p50_ms": pct(inproc, 50),
        "in_process_p95_ms": pct(inproc, 95),
        "http_p50_ms": pct(http, 50),
        "http_p95_ms": pct(http, 95),
        "overhead_p50_ms": pct([h - i for h, i in zip(http, inproc, strict=True)], 50),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="REST search against the same in process.")
    parser.add_argument("--db", type=Path, required=True, help="the copy to serve (overwritten)")
    parser.add_argument("--from", dest="source", type=Path, required=True, help="a core.py db")
    parser.add_argument("--user", default="bench", help="its user (default bench)")
    parser.add_argument("--queries", type=int, default=100, help="questions (default 100)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.queries < 1:
        parser.error("--queries must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    copy_database(args.source, args.db)
    key, _ = prepare_copy(args.db, args.user)
    admin_key = f"ms_bench_{secrets.token_urlsafe(24)}"
    asked = questions(args.queries)
    with (
        serving(args.db, admin_key, Path(f"{args.db}.server.log")) as (url, _),
        MemoryOS.open(str(args.db)) as memory,
        Client(url, key, timeout=120) as client,
    ):
        memory.search(asked[0], user_id=args.user, top_k=TOP_K)  # loads the model and vectors
        client.search(asked[0], top_k=TOP_K)
        result = measure(memory, client, args.user, asked)
    for name, value in result.items():
        print(f"{name:<20} {value}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
