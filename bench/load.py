"""Load benchmark of the REST server: N concurrent clients adding and searching for D seconds.

Run from the repository root, in the project's virtual environment::

    python bench/load.py --db /tmp/load.db                               # a new database file
    python bench/load.py --db /tmp/load/e5.db --from /tmp/bench/e5.db    # a copy of a core.py cube
    python bench/load.py --url http://127.0.0.1:8765 --key ADMIN_KEY     # a server already running
    python bench/load.py --url http://127.0.0.1:8001 --also http://127.0.0.1:8002 --key ADMIN_KEY

The clients run in this process (asyncio, one ``httpx.AsyncClient``, one connection each); the
server in another: with ``--db`` this script starts ``memstrata --db PATH serve`` on a free
127.0.0.1 port with a fresh ``MEMSTRATA_ADMIN_KEY`` (every other setting, ``workers`` included,
from the environment as usual) and stops it at the end; with ``--url`` it uses that server, and
with ``--also`` more servers on the same database (docs/deploy.md): client n talks to server
n mod the number of servers.

What the clients work on:

* a new database, or ``--url`` with an admin's ``--key``: a new user, its key and a cube holding
  ``--seed-turns`` synthetic turns (``core.conversation``), added through the API; the run waits
  for their consolidation before it starts.  Adds go into that cube.
* ``--from SRC``: SRC (a database of ``bench/core.py``, e.g. its 100k-turn e5 cube) is copied to
  ``--db`` and only the copy is touched: ``--user`` (default ``bench``) gets a key through
  ``MemoryOS`` before the server starts, and a cube ``load-adds`` for the adds.  The adds do not
  go into the big cube because core.py builds it with every turn in the working tier: one add
  would queue the consolidation of that whole backlog, a benchmark of its own.
* ``--url`` with ``--cube``: ``--key`` is the key of a user who may write that cube; nothing is
  made, adds go into the cube.

Each client loops until the time is up: an add (one message, ``POST /memories``, in a session of
its own) or a search (``POST /search``, ``--top-k`` 10, over every cube the user may read), chosen
at random in the ``--mix`` ratio (adds:searches, default 1:4), then ``--think`` seconds of pause
(default 0: the next request at once).  A request fails when it raises or answers other than 200.

Figures: requests/s (every request answered or failed over the run, the last ones included),
errors (with a few samples), and per operation the count of successful requests and their latency
p50/p95/p99/max in milliseconds (wall-clock, sent to answered, seen by the client); the CPU
seconds of the server and of this process; the items the user could read when the run began.
Printed as a table; ``--out`` writes them as JSON.  The exit status is 1 when any request failed.

With no pause each client sends its next request as soon as the last is answered, so the
latency is what the server's queue makes it: about clients / throughput (Little's law).  Use
``--think`` to model agents that pause between calls (each pause is drawn from 0.5-1.5 times it,
and each client starts at a random point of its first pause, so arrivals are spread out).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby, islice
from pathlib import Path
from typing import Any

import httpx
from core import SEED, conversation, pct, questions

from memstrata import MemoryOS
from memstrata.client import Client
from memstrata.errors import MemstrataError
from memstrata.model import Cube

#: What the run should show (issue 4): no failed request, search p95 at most this, in ms.
TARGET_SEARCH_P95_MS = 50.0
STARTUP_S = 120.0
SEED_BATCH = 64
QUESTIONS = 500
TOP_K = 10
ADDS_CUBE = "load-adds"


@dataclass
class Target:
    """What the clients use: the server, a key, the cube adds go into; the server we started."""

    url: str
    key: str
    cube_id: str
    process: subprocess.Popen[bytes] | None = None
    #: other servers on the same database, sharing the clients
    also: Sequence[str] = ()


@dataclass
class Samples:
    """Latencies (ms) per operation, and the failures."""

    ms: dict[str, list[float]] = field(default_factory=lambda: {"add": [], "search": []})
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    #: Requests sent again after a 409 that asked for a retry (``soak.py``'s updates).
    retries: int = 0

    def failed(self, op: str, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(f"{op}: {what}")


# -- preparing the server --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(db: Path, admin_key: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``memstrata --db DB serve`` in a child process until its /health answers; Ctrl-C after."""
    port = free_port()
    env = {**os.environ, "MEMSTRATA_ADMIN_KEY": admin_key}
    command = [sys.executable, "-m", "memstrata", "--db", str(db), "serve", "--port", str(port)]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        yield url, process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while True:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}); see {log}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the server did not answer within {STARTUP_S:.0f} s; see {log}")
        time.sleep(0.2)


def copy_database(source: Path, db: Path) -> None:
    """Copy ``source`` (and its write-ahead log, if any) to ``db``; ``source`` is only read."""
    if db.exists() and source.resolve() == db.resolve():
        raise SystemExit("--db must not be the --from file: the run writes to it")
    db.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    for suffix in ("", "-wal"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{db}{suffix}")


def prepare_copy(db: Path, user_id: str) -> tuple[str, str]:
    """A key for ``user_id`` and a cube for the adds, made in the copy before the server runs."""
    with MemoryOS.open(str(db), workers=0) as memory:
        key = memory.create_key(user_id, by=user_id, label="bench/load.py").secret
        owned = [c.cube_id for c in memory.list_cubes(user_id=user_id) if c.owner == user_id]
        if ADDS_CUBE not in owned:
            memory.create_cube("load benchmark adds", owner=user_id, cube_id=ADDS_CUBE)
    assert key is not None  # create_key always returns the secret
    return key, ADDS_CUBE


def prepare_user(url: str, admin_key: str, seed_turns: int) -> tuple[str, str]:
    """Through the API: a new user, its key, and a cube of ``seed_turns`` turns, consolidated."""
    with Client(url, admin_key, timeout=120) as admin:
        user_id = f"load-{secrets.token_hex(3)}"
        admin.create_user(user_id, name="load benchmark")
        key = admin.create_key(user_id, label="bench/load.py").secret or ""
    with Client(url, key, timeout=120) as client:
        cube = client.create_cube("load benchmark", cube_id=f"{user_id}-cube")
        seed(client, cube, seed_turns)
        client.wait(cube.cube_id, timeout=600)
    return key, cube.cube_id


def seed(client: Client, cube: Cube, turns: int) -> None:
    """``turns`` turns of ``core.conversation``, one add call per session (at most 64 turns)."""
    stream = islice(conversation(SEED + 7), turns)
    for session, messages in groupby(stream, key=lambda m: str(m["metadata"]["session"])):
        batch = list(messages)
        for start in range(0, len(batch), SEED_BATCH):
            part = batch[start : start + SEED_BATCH]
            client.add(part, cube_id=cube.cube_id, session_id=session)


def readable_items(client: Client) -> int:
    """Items in the caller's cubes, from the ``memstrata_items`` gauge of ``/metrics``."""
    lines = client.metrics().splitlines()
    return int(sum(float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith("memstrata_items{")))


def warm_up(target: Target) -> int:
    """Load the server's model and vectors (the first search) before the clock starts."""
    with Client(target.url, target.key, timeout=120) as client:
        client.search("Where did Caroline go hiking?")
        client.add("warming up the load benchmark", cube_id=target.cube_id, session_id="warm-up")
        client.search("What is Melanie's favourite food?")
        return readable_items(client)


# -- the load --------------------------------------------------------------------------------


async def run_load(target: Target, args: argparse.Namespace) -> tuple[Samples, float]:
    """Every client until ``args.duration`` is up; the samples and the seconds it all took."""
    samples = Samples()
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    headers = {"Authorization": f"Bearer {target.key}"}
    asked = questions(QUESTIONS)
    async with contextlib.AsyncExitStack() as stack:
        https = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits)
            )
            for url in (target.url, *target.also)
        ]
        start = time.perf_counter()
        deadline = start + args.duration
        clients = [
            one_client(https[n % len(https)], n, deadline, target.cube_id, asked, args, samples)
            for n in range(args.clients)
        ]
        await asyncio.gather(*clients)
        return samples, time.perf_counter() - start


async def one_client(
    http: httpx.AsyncClient,
    n: int,
    deadline: float,
    cube_id: str,
    asked: Sequence[str],
    args: argparse.Namespace,
    samples: Samples,
) -> None:
    rng = random.Random(SEED + n)
    turns = conversation(SEED + 1000 + n)
    adds, searches = args.mix
    # Agents are not in lockstep: each starts at a random point of its first pause, and each
    # pause is drawn from 0.5-1.5 x --think (else 50 clients would arrive as one burst forever).
    if args.think:
        await asyncio.sleep(rng.uniform(0, args.think))
    while time.perf_counter() < deadline:
        if rng.random() < adds / (adds + searches):
            op, path = "add", "/memories"
            message = {k: v for k, v in next(turns).items() if k != "metadata"}
            body: dict[str, Any] = {
                "cube_id": cube_id, "messages": [message], "session_id": f"load-{n}",
            }  # fmt: skip
        else:
            op, path = "search", "/search"
            body = {"query": rng.choice(asked), "top_k": args.top_k}
        await request(http, op, path, body, samples)
        if args.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * args.think)


async def request(
    http: httpx.AsyncClient,
    op: str,
    path: str,
    body: dict[str, Any],
    samples: Samples,
    method: str = "POST",
    retries: int = 0,
) -> httpx.Response | None:
    """Send one request and note its latency under ``op``; the response when it is a 200, else
    None (the failure is noted instead).  With ``retries``, a 409 for an item changed since the
    server read it (``is_stale_read``) is sent again, up to that many times, as its hint says;
    the latency is then the whole exchange's."""
    started = time.perf_counter()
    try:
        response = await http.request(method, path, json=body)
        for _ in range(retries):
            if not is_stale_read(response):
                break
            samples.retries += 1
            response = await http.request(method, path, json=body)
    except httpx.HTTPError as exc:
        samples.failed(op, f"{type(exc).__name__}: {exc}")
        return None
    if response.status_code != 200:
        samples.failed(op, f"{response.status_code} {response.text[:200]}")
        return None
    samples.ms[op].append((time.perf_counter() - started) * 1000)
    return response


def is_stale_read(response: httpx.Response) -> bool:
    """Whether ``response`` is the 409 of a write that lost a race: the item changed between
    the server's read of it and its write (e.g. a background task moved it to another tier
    while an update was being embedded); the hint is to read it again and retry."""
    if response.status_code != 409:
        return False
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return error.get("code") == "conflict" and "changed since it was read" in error.get(
        "message", ""
    )


# -- the report ------------------------------------------------------------------------------


def latency(ms: Sequence[float], elapsed: float) -> dict[str, float | int | None]:
    if not ms:
        return {"count": 0, "per_s": 0.0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    figures = {f"p{q}_ms": round(pct(ms, q), 2) for q in (50, 95, 99)}
    return {"count": len(ms), "per_s": round(len(ms) / elapsed, 1), **figures,
            "max_ms": round(max(ms), 2)}  # fmt: skip


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux), or of this process."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(
    args: argparse.Namespace, items: int, samples: Samples, elapsed: float, cpu: dict[str, Any]
) -> dict[str, Any]:
    done = sum(len(ms) for ms in samples.ms.values()) + samples.errors
    search = latency(samples.ms["search"], elapsed)
    p95 = search["p95_ms"]
    return {
        "clients": args.clients,
        "duration_s": args.duration,
        "mix": {"adds": args.mix[0], "searches": args.mix[1]},
        "think_s": args.think,
        "top_k": args.top_k,
        "server": " + ".join([args.url, *args.also]) if args.url else "started by bench/load.py",
        "db": str(args.db) if args.db else None,
        "copied_from": str(args.source) if args.source else None,
        "items_at_start": items,
        "elapsed_s": round(elapsed, 2),
        "requests": done,
        "requests_per_s": round(done / elapsed, 1),
        "errors": samples.errors,
        "error_samples": samples.error_samples,
        "add": latency(samples.ms["add"], elapsed),
        "search": search,
        "cpu_s": cpu,
        "target": {
            "zero_errors": samples.errors == 0,
            "search_p95_ms_at_most": TARGET_SEARCH_P95_MS,
            "search_p95_met": p95 is not None and float(p95) <= TARGET_SEARCH_P95_MS,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }


def latency_lines(result: dict[str, Any], ops: Sequence[str], width: int) -> list[str]:
    """A header, a row per operation of ``result`` (requests, req/s, p50/p95/p99/max ms; "-"
    where none was timed) and a total row; the first column ``width`` wide."""
    names = ("p50_ms", "p95_ms", "p99_ms", "max_ms")
    lines = [f"{'op':<{width}}{'requests':>10}{'req/s':>9}"
             + "".join(f"{n.replace('_ms', ' ms'):>9}" for n in names)]  # fmt: skip
    for op in ops:
        row = result[op]
        shown = "".join(f"{'-' if row.get(k) is None else row[k]:>9}" for k in names)
        lines.append(f"{op:<{width}}{row['count']:>10}{row['per_s']:>9}{shown}")
    lines.append(f"{'all':<{width}}{result['requests']:>10}{result['requests_per_s']:>9}")
    return lines


def table(result: dict[str, Any]) -> str:
    mix = result["mix"]
    lines = [
        f"{result['clients']} clients, {result['duration_s']} s, adds:searches "
        f"{mix['adds']}:{mix['searches']}, think {result['think_s']} s, "
        f"{result['items_at_start']:,} items readable at start",
        *latency_lines(result, ("add", "search"), 8),
    ]
    target = result["target"]
    lines.append(
        f"errors: {result['errors']}; search p95 ≤ {TARGET_SEARCH_P95_MS:g} ms: "
        f"{'met' if target['search_p95_met'] else 'missed'}; "
        f"CPU s: server {result['cpu_s']['server']}, load generator "
        f"{result['cpu_s']['load_generator']}"
    )
    lines.extend(f"  {sample}" for sample in result["error_samples"])
    return "\n".join(lines)


# -- the command -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    where = parser.add_argument_group("the server")
    where.add_argument("--db", type=Path, help="start a server on this (new) database file")
    where.add_argument("--from", dest="source", type=Path, help="copy this database to --db first")
    where.add_argument("--user", default="bench", help="with --from: its user (default bench)")
    where.add_argument("--url", help="use the server running at this URL instead")
    where.add_argument("--key", help="with --url: an admin's key, or with --cube a user's key")
    where.add_argument("--also", action="append", default=[], metavar="URL",
                       help="with --url: another server on the same database (repeatable)")  # fmt: skip
    where.add_argument("--cube", help="with --url: add into this cube (made by nobody here)")
    where.add_argument("--server-log", type=Path, help="server output (default: DB.server.log)")
    where.add_argument("--seed-turns", type=int, default=1000, help="turns in a new cube (1000)")
    load = parser.add_argument_group("the load")
    load.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    load.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    load.add_argument("--mix", default="1:4", help="adds:searches (default 1:4)")
    load.add_argument("--think", type=float, default=0.0, help="pause after each request, s")
    load.add_argument("--top-k", type=int, default=TOP_K, help="hits per search (default 10)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if (args.db is None) == (args.url is None):
        parser.error("give --db (start a server) or --url (use a running one)")
    if args.url and not args.key:
        parser.error("--url needs --key")
    if args.also and not args.url:
        parser.error("--also needs --url")
    if args.source and not args.db:
        parser.error("--from needs --db (the copy)")
    if args.source and not args.source.is_file():
        parser.error(f"--from {args.source}: no such file")
    if args.db and not args.source and args.db.exists():
        parser.error(f"--db {args.db} exists: give a new file, or copy one with --from")
    try:
        args.mix = tuple(int(n) for n in args.mix.split(":"))
    except ValueError:
        parser.error("--mix is adds:searches, e.g. 1:4")
    if len(args.mix) != 2 or min(args.mix) < 0 or sum(args.mix) == 0:
        parser.error("--mix is adds:searches, e.g. 1:4")
    if args.clients < 1 or args.duration <= 0 or args.think < 0 or args.seed_turns < 0:
        parser.error("--clients and --duration must be positive, --think and --seed-turns ≥ 0")
    return args


def measure(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    items = warm_up(target)
    server = None if target.process is None else target.process.pid
    # A server this script did not start is not measured (None), not taken for this process.
    before = {"server": server and cpu_seconds(server), "load_generator": cpu_seconds(None)}
    samples, elapsed = asyncio.run(run_load(target, args))
    after = {"server": server and cpu_seconds(server), "load_generator": cpu_seconds(None)}
    cpu = {name: _spent(before[name], after[name]) for name in before}
    return report(args, items, samples, elapsed, cpu)


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 1)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = prepare_and_measure(args)
    except MemstrataError as exc:  # e.g. a --key that is not an admin's
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if result["errors"] or not result["requests"] else 0


def prepare_and_measure(args: argparse.Namespace) -> dict[str, Any]:
    if args.url:
        if args.cube:
            return measure(Target(args.url, args.key, args.cube, also=args.also), args)
        key, cube_id = prepare_user(args.url, args.key, args.seed_turns)
        return measure(Target(args.url, key, cube_id, also=args.also), args)
    return start_and_measure(args)


def start_and_measure(args: argparse.Namespace) -> dict[str, Any]:
    """Prepare ``--db`` (a copy of ``--from``, or a new user and cube), serve it, measure."""
    db: Path = args.db
    prepared = None
    if args.source:
        copy_database(args.source, db)
        prepared = prepare_copy(db, args.user)
    admin_key = f"ms_bench_{secrets.token_urlsafe(24)}"
    log = args.server_log or Path(f"{db}.server.log")
    with serving(db, admin_key, log) as (url, process):
        key, cube_id = prepared or prepare_user(url, admin_key, args.seed_turns)
        return measure(Target(url, key, cube_id, process), args)


if __name__ == "__main__":
    sys.exit(main())
