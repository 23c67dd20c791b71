"""Soak test of the REST server: N clients for T seconds mixing adds, searches, contexts,
updates and erasures; every request must succeed and the server's memory must stay flat.

Run from the repository root, in the project's virtual environment::

    python bench/soak.py --db /tmp/soak.db                                  # 50 clients, 300 s
    python bench/soak.py --db /tmp/soak.db --clients 8 --duration 20 --out soak.json

The server is ``memstrata --db PATH serve`` on a free 127.0.0.1 port with a fresh
``MEMSTRATA_ADMIN_KEY`` (``load.serving``; every other setting from the environment as usual),
stopped with Ctrl-C at the end; PATH must not exist.  Through the API the script makes ``--users``
users (default 5), each with a key and a cube of ``--seed-turns`` turns (``load.prepare_user``),
and spreads the clients over them.  The clients run in this process (asyncio, one connection
each), first for ``--warm-up`` seconds (default 30: the server's thread pool, database caches
and allocator reach their working size; nothing is timed, but a failure counts), then for
``--duration`` seconds, measured.  Each loops: an operation drawn in the ``--mix`` ratio
(add:search:context:update:erase, default 3:5:3:2:1), then a pause of 0.5-1.5 × ``--think``
seconds (default 1: agents that call about once a second; each client starts at a random
point of its first pause).

* add: one or two turns of ``core.conversation`` into the user's cube (``POST /memories``);
* search: a ``core.questions`` question, top 10 (``POST /search``);
* context: the same kind of question, 300 tokens (``POST /context``);
* update: new text for one of the turns this client added (``PUT /memories/{cube}/{id}``); a
  409 "changed since it was read" is sent again, up to 3 times (a background task moved the
  turn to the mid tier while the update was embedded: a new version between the server's read
  and its write), and counted as a retry, not an error;
* erase: the oldest turn this client added, for good (``POST /erase``).

An update or erase with nothing of its own to change yet is an add instead.  A request fails
when it raises or answers other than 200.  Figures: per operation the count of successful
requests and their latency p50/p95/p99/max in ms (``load.latency``; an update's includes its
retries); errors, with samples; the updates retried; requests/s; the server's CPU seconds; its
resident memory (VmRSS) before any load ("idle"), when the measured run starts ("start"), every
``--rss-every`` seconds during it and at the end (the highest of all is "peak"), and the growth from
start to end.  The exit status is 1 when a request
failed (warm-up included) or the growth reached ``--max-rss-growth`` percent (default 10).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from core import SEED, conversation, questions
from load import Samples, cpu_seconds, latency, latency_lines, prepare_user, request, serving

OPS = ("add", "search", "context", "update", "erase")
QUESTIONS = 500
TOP_K = 10
BUDGET_TOKENS = 300
#: Turns a client remembers as its own, for updates and erasures.
OWN_TURNS = 50
#: Times an update that lost a race with a background write is sent again (``load.request``).
UPDATE_RETRIES = 3


@dataclass
class User:
    key: str
    cube_id: str


@dataclass
class Memory:
    """The server's resident memory in MiB: idle, when the measured run starts, during it, at
    the end."""

    idle: float
    start: float | None = None
    samples: list[tuple[float, float]] = field(default_factory=list)  # (seconds in, MiB)
    end: float | None = None

    def figures(self) -> dict[str, Any]:
        start, end = self.start, self.end
        growth = None if start is None or end is None else (end - start) / start * 100
        return {
            "idle_mib": round(self.idle, 1),
            "start_mib": None if start is None else round(start, 1),
            "peak_mib": round(
                max([start or 0.0, *(mib for _, mib in self.samples), end or 0.0]), 1
            ),
            "end_mib": None if end is None else round(end, 1),
            "growth_pct": None if growth is None else round(growth, 2),
            "samples": [(round(t, 1), round(mib, 1)) for t, mib in self.samples],
        }


@dataclass
class Phases:
    """The warm-up's samples (not reported, but its failures count) and the measured run's."""

    measured_from: float  # perf_counter time the measured run starts
    until: float
    warm: Samples = field(default_factory=lambda: Samples(ms={op: [] for op in OPS}))
    measured: Samples = field(default_factory=lambda: Samples(ms={op: [] for op in OPS}))

    def now(self) -> Samples:
        return self.measured if time.perf_counter() >= self.measured_from else self.warm


def rss_mib(pid: int) -> float:
    """Resident set size of process ``pid`` (Linux ``/proc``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for process {pid}")


# -- the clients -------------------------------------------------------------------------------


async def one_client(
    http: httpx.AsyncClient,
    n: int,
    user: User,
    phases: Phases,
    asked: Sequence[str],
    args: argparse.Namespace,
) -> None:
    rng = random.Random(SEED + n)
    turns = conversation(SEED + 2000 + n)
    mine: deque[str] = deque(maxlen=OWN_TURNS)
    if args.think:
        await asyncio.sleep(rng.uniform(0, args.think))
    while time.perf_counter() < phases.until:
        samples = phases.now()
        op = rng.choices(OPS, weights=args.mix)[0]
        if op in ("update", "erase") and not mine:
            op = "add"
        if op == "add":
            count = rng.choice((1, 2))
            messages = [
                {k: v for k, v in next(turns).items() if k != "metadata"} for _ in range(count)
            ]
            body = {"cube_id": user.cube_id, "messages": messages, "session_id": f"soak-{n}"}
            answer = await request(http, op, "/memories", body, samples)
            if answer is not None:
                mine.extend(answer.json()["ids"])
        elif op == "search":
            body = {"query": rng.choice(asked), "top_k": TOP_K}
            await request(http, op, "/search", body, samples)
        elif op == "context":
            body = {"query": rng.choice(asked), "budget_tokens": BUDGET_TOKENS}
            await request(http, op, "/context", body, samples)
        elif op == "update":
            item = rng.choice(mine)
            body = {"text": f"{next(turns)['content']} (edited)", "reason": "soak"}
            path = f"/memories/{user.cube_id}/{item}"
            # The turn may be moved to the mid tier by the server's background work between
            # its read and its write of the update (a new version: the update answers 409,
            # "read it again and retry"); a client retries, and the retries are counted.
            await request(http, op, path, body, samples, method="PUT", retries=UPDATE_RETRIES)
        else:
            body = {"item_id": mine.popleft(), "reason": "soak"}
            await request(http, op, "/erase", body, samples)
        if args.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * args.think)


async def watch_memory(pid: int, memory: Memory, every_s: float, phases: Phases) -> None:
    """RSS when the measured run starts, then every ``every_s`` seconds until it ends."""
    await asyncio.sleep(max(0.0, phases.measured_from - time.perf_counter()))
    memory.start = rss_mib(pid)
    while (now := time.perf_counter()) < phases.until:
        await asyncio.sleep(min(every_s, phases.until - now))
        memory.samples.append((time.perf_counter() - phases.measured_from, rss_mib(pid)))


async def run_soak(
    url: str, users: list[User], pid: int, memory: Memory, args: argparse.Namespace
) -> tuple[Phases, float]:
    """Every client through the warm-up and the measured run; the phases' samples and the
    measured run's length in seconds."""
    asked = questions(QUESTIONS)
    per_user = -(-args.clients // len(users))
    # Idle connections are dropped by the client before uvicorn's 5 s keep-alive timeout does:
    # a request sent on a connection the server is closing fails with no answer (ReadError).
    limits = httpx.Limits(
        max_connections=per_user, max_keepalive_connections=per_user, keepalive_expiry=2.0
    )
    https = [
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {u.key}"}, timeout=60, limits=limits
        )
        for u in users
    ]
    try:
        measured_from = time.perf_counter() + args.warm_up
        phases = Phases(measured_from, measured_from + args.duration)
        clients = [
            one_client(https[n % len(users)], n, users[n % len(users)], phases, asked, args)
            for n in range(args.clients)
        ]
        await asyncio.gather(watch_memory(pid, memory, args.rss_every, phases), *clients)
        return phases, time.perf_counter() - measured_from
    finally:
        for http in https:
            await http.aclose()


# -- the report --------------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    phases: Phases,
    elapsed: float,
    memory: Memory,
    cpu_s: float | None,
    exit_status: int | None,
) -> dict[str, Any]:
    samples = phases.measured
    errors = phases.warm.errors + samples.errors
    done = sum(len(ms) for ms in samples.ms.values()) + samples.errors
    figures = memory.figures()
    growth = figures["growth_pct"]
    return {
        "clients": args.clients,
        "users": args.users,
        "warm_up_s": args.warm_up,
        "duration_s": args.duration,
        "mix": dict(zip(OPS, args.mix, strict=True)),
        "think_s": args.think,
        "seed_turns": args.seed_turns,
        "elapsed_s": round(elapsed, 2),
        "requests": done,
        "requests_per_s": round(done / elapsed, 1),
        "warm_up_requests": sum(len(ms) for ms in phases.warm.ms.values()) + phases.warm.errors,
        "errors": errors,
        "update_retries": phases.warm.retries + samples.retries,
        "error_samples": (phases.warm.error_samples + samples.error_samples)[:10],
        **{op: latency(samples.ms[op], elapsed) for op in OPS},
        "server_rss": figures,
        "server_cpu_s": cpu_s,  # warm-up included
        "server_exit_status": exit_status,
        "target": {
            "zero_errors": errors == 0,
            "rss_growth_pct_below": args.max_rss_growth,
            "rss_growth_met": growth is not None and growth < args.max_rss_growth,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['clients']} clients over {result['users']} users, {result['warm_up_s']} s "
        f"warm-up + {result['duration_s']} s measured, "
        f"mix {':'.join(str(w) for w in result['mix'].values())} "
        f"({':'.join(result['mix'])}), think {result['think_s']} s",
        *latency_lines(result, OPS, 9),
    ]
    rss = result["server_rss"]
    lines.append(
        f"errors: {result['errors']} (updates retried after a 409: "
        f"{result['update_retries']}); server RSS MiB: idle {rss['idle_mib']}, start "
        f"{rss['start_mib']}, peak "
        f"{rss['peak_mib']}, end {rss['end_mib']} (growth {rss['growth_pct']} %, limit "
        f"{result['target']['rss_growth_pct_below']} %); server CPU s (with the warm-up) "
        f"{result['server_cpu_s']}; "
        f"server exit status {result['server_exit_status']}"
    )
    lines.extend(f"  {sample}" for sample in result["error_samples"])
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", type=Path, required=True, help="a new database file to serve")
    parser.add_argument("--server-log", type=Path, help="server output (default: DB.server.log)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds (default 300)")
    parser.add_argument("--warm-up", type=float, default=30.0, help="seconds first (default 30)")
    parser.add_argument("--users", type=int, default=5, help="users, a cube each (default 5)")
    parser.add_argument("--seed-turns", type=int, default=100, help="turns per cube (100)")
    parser.add_argument("--mix", default="3:5:3:2:1", help="add:search:context:update:erase")
    parser.add_argument("--think", type=float, default=1.0, help="pause after a request, s (1)")
    parser.add_argument("--rss-every", type=float, default=5.0, help="RSS sample period, s (5)")
    parser.add_argument("--max-rss-growth", type=float, default=10.0, help="percent (10)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.db.exists():
        parser.error(f"--db {args.db} exists: give a new file")
    try:
        args.mix = tuple(int(n) for n in args.mix.split(":"))
    except ValueError:
        parser.error("--mix is add:search:context:update:erase, e.g. 3:5:3:2:1")
    if len(args.mix) != len(OPS) or min(args.mix) < 0 or sum(args.mix) == 0:
        parser.error("--mix is add:search:context:update:erase, e.g. 3:5:3:2:1")
    if min(args.clients, args.users) < 1 or args.duration <= 0 or min(args.think, args.warm_up) < 0:
        parser.error("--clients, --users ≥ 1; --duration positive; --think, --warm-up ≥ 0")
    if args.seed_turns < 0 or args.rss_every <= 0 or args.max_rss_growth <= 0:
        parser.error("--seed-turns ≥ 0; --rss-every and --max-rss-growth positive")
    return args


def soak(args: argparse.Namespace) -> dict[str, Any]:
    admin_key = f"ms_soak_{secrets.token_urlsafe(24)}"
    log = args.server_log or Path(f"{args.db}.server.log")
    with serving(args.db, admin_key, log) as (url, process):
        users = [User(*prepare_user(url, admin_key, args.seed_turns)) for _ in range(args.users)]
        warm_up(url, users[0])
        memory = Memory(idle=rss_mib(process.pid))
        cpu_before = cpu_seconds(process.pid)
        phases, elapsed = asyncio.run(run_soak(url, users, process.pid, memory, args))
        memory.end = rss_mib(process.pid)
        cpu_after = cpu_seconds(process.pid)
    cpu_s = None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 1)
    return report(args, phases, elapsed, memory, cpu_s, process.returncode)


def warm_up(url: str, user: User) -> None:
    """One of each operation, so the model and vectors are loaded before any load."""
    headers = {"Authorization": f"Bearer {user.key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        message = {"role": "user", "content": "warming up the soak"}
        ids = http.post("/memories", json={"cube_id": user.cube_id, "messages": [message]})
        item = ids.raise_for_status().json()["ids"][0]
        http.post("/search", json={"query": "Where did Caroline go hiking?"}).raise_for_status()
        body = {"query": "What does Melanie paint?", "budget_tokens": BUDGET_TOKENS}
        http.post("/context", json=body).raise_for_status()
        path = f"/memories/{user.cube_id}/{item}"
        http.put(path, json={"text": "warmed up the soak"}).raise_for_status()
        http.post("/erase", json={"item_id": item}).raise_for_status()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = soak(args)
    print(table(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    met = result["target"]["zero_errors"] and result["target"]["rss_growth_met"]
    return 0 if met and result["requests"] else 1


if __name__ == "__main__":
    sys.exit(main())
