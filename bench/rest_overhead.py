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

Wall time on a loaded machine is mostly waiting for a core, so the same timed calls are also
clocked in CPU time: this process's thread (``time.thread_time``: the in-process search, and
the client's side of the HTTP one) and every thread of the server (``/proc/PID/task/*/schedstat``,
nanoseconds; Linux only, else those keys are absent).  ``cpu_overhead_p50_ms`` is the p50 of
client + server - in process, per question.  ``health_cpu_p50_ms`` is the same client + server
CPU for ``GET /health``, the least any request costs on this stack (no key, no body).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memstrata import MemoryOS
from memstrata.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import questions
from load import copy_database, prepare_copy, serving

TOP_K = 10


def pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values, np.float64), q)), 3)


def server_cpu_ns(pid: int) -> int | None:
    """CPU nanoseconds the threads of process ``pid`` have run so far; None off Linux."""
    total = 0
    try:
        names = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for name in names:
        try:
            with open(f"/proc/{pid}/task/{name}/schedstat", encoding="ascii") as stat:
                total += int(stat.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total


class Clock:
    """Wall and CPU milliseconds of one call: this thread's, and the server's threads'."""

    def __init__(self, server_pid: int | None) -> None:
        self.pid = server_pid
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.server: list[float] = []

    def time(self, call: Callable[[], object]) -> None:
        before = None if self.pid is None else server_cpu_ns(self.pid)
        start, cpu = time.perf_counter(), time.thread_time()
        call()
        self.cpu.append((time.thread_time() - cpu) * 1000)
        self.wall.append((time.perf_counter() - start) * 1000)
        after = None if self.pid is None else server_cpu_ns(self.pid)
        if before is not None and after is not None:
            self.server.append((after - before) / 1e6)


def measure(
    memory: MemoryOS, client: Client, user: str, asked: list[str], server_pid: int | None = None
) -> dict[str, Any]:
    """Per question, the second of two searches in process and over HTTP (see the module doc)."""
    inproc, http = Clock(None), Clock(server_pid)

    def local(q: str) -> None:
        memory.search(q, user_id=user, top_k=TOP_K)
        inproc.time(lambda: memory.search(q, user_id=user, top_k=TOP_K))

    def remote(q: str) -> None:
        client.search(q, top_k=TOP_K)
        http.time(lambda: client.search(q, top_k=TOP_K))

    for n, q in enumerate(asked):
        if n % 2:
            remote(q)
            local(q)
        else:
            local(q)
            remote(q)
    result = {
        "questions": len(asked),
        "in_process_p50_ms": pct(inproc.wall, 50),
        "in_process_p95_ms": pct(inproc.wall, 95),
        "http_p50_ms": pct(http.wall, 50),
        "http_p95_ms": pct(http.wall, 95),
        "overhead_p50_ms": pct([h - i for h, i in zip(http.wall, inproc.wall, strict=True)], 50),
        "in_process_cpu_p50_ms": pct(inproc.cpu, 50),
        "client_cpu_p50_ms": pct(http.cpu, 50),
    }
    if len(http.server) == len(asked):
        spent = [c + s - i for c, s, i in zip(http.cpu, http.server, inproc.cpu, strict=True)]
        result["server_cpu_p50_ms"] = pct(http.server, 50)
        result["cpu_overhead_p50_ms"] = pct(spent, 50)
    return result


def health_cpu(client: httpx.Client, server_pid: int, rounds: int = 40) -> float | None:
    """The p50 of client + server CPU milliseconds of ``GET /health`` (after a few to warm)."""
    for _ in range(5):
        client.get("/health")
    clock = Clock(server_pid)
    for _ in range(rounds):
        clock.time(lambda: client.get("/health").raise_for_status())
    if len(clock.server) != rounds:
        return None
    return pct([c + s for c, s in zip(clock.cpu, clock.server, strict=True)], 50)


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
        serving(args.db, admin_key, Path(f"{args.db}.server.log")) as (url, server),
        MemoryOS.open(str(args.db)) as memory,
        Client(url, key, timeout=120) as client,
        httpx.Client(base_url=url, timeout=120) as plain,
    ):
        memory.search(asked[0], user_id=args.user, top_k=TOP_K)  # loads the model and vectors
        client.search(asked[0], top_k=TOP_K)
        result = measure(memory, client, args.user, asked, server.pid)
        floor = health_cpu(plain, server.pid)
        if floor is not None:
            result["health_cpu_p50_ms"] = floor
    for name, value in result.items():
        print(f"{name:<22} {value}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
