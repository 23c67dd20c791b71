"""``bench/load.py`` against several servers and workers on one PostgreSQL database and Redis.

Run from the repository root, in the project's virtual environment, on an idle machine::

    python bench/cluster.py --postgres postgresql://postgres@127.0.0.1:15432/postgres \\
        --redis redis://127.0.0.1:16379/0 -- --clients 50 --duration 60 --out bench/load-pg.json

It makes a new database on the PostgreSQL server (dropped at the end) and empties the Redis
database, starts ``--servers`` (2) ``memstrata serve --workers 0`` and ``--workers`` (2)
``memstrata worker`` processes on them with one admin key, then runs ``bench/load.py --url
FIRST --also OTHER… --key ADMIN`` with the arguments after ``--`` (its clients spread over the
servers; see its docstring for the figures), and stops everything.  Logs go to ``--logs``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
import redis

from memstrata.cli.serve import DEFAULT_PORT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="DSN of a server (a database is made)")
    parser.add_argument("--redis", required=True, help="URL of a Redis database (emptied)")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--logs", type=Path, default=Path("/tmp/memstrata-cluster"))
    parser.add_argument("load", nargs=argparse.REMAINDER, help="-- then bench/load.py's options")
    args = parser.parse_args()
    load_args = args.load[1:] if args.load[:1] == ["--"] else args.load
    args.logs.mkdir(parents=True, exist_ok=True)
    name = f"bench_cluster_{uuid.uuid4().hex[:8]}"
    dsn = args.postgres.rsplit("/", 1)[0] + f"/{name}"
    key = f"ms_bench_{secrets.token_urlsafe(24)}"
    env = {**os.environ, "MEMSTRATA_DB": dsn, "MEMSTRATA_REDIS_URL": args.redis,
           "MEMSTRATA_ADMIN_KEY": key}  # fmt: skip
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    redis.Redis.from_url(args.redis).flushdb()
    with ExitStack() as stack:
        stack.callback(drop, args.postgres, name)
        urls = []
        for n in range(args.servers):
            port = DEFAULT_PORT + 100 + n
            urls.append(f"http://127.0.0.1:{port}")
            start(
                stack,
                ["serve", "--port", str(port), "--workers", "0"],
                env,
                args.logs / f"serve{n}.log",
            )
            if n == 0:  # the first creates the schema and the admin; the others find them
                healthy(urls[0])
        for n in range(args.workers):
            start(stack, ["worker"], env, args.logs / f"worker{n}.log")
        for url in urls:
            healthy(url)
        also = [a for url in urls[1:] for a in ("--also", url)]
        command = [
            sys.executable,
            "bench/load.py",
            "--url",
            urls[0],
            *also,
            "--key",
            key,
            *load_args,
        ]
        return subprocess.run(command, check=False).returncode


def start(stack: ExitStack, args: list[str], env: dict[str, str], log: Path) -> None:
    out = stack.enter_context(log.open("ab"))
    process = subprocess.Popen([sys.executable, "-m", "memstrata", *args], stdout=out,
                               stderr=subprocess.STDOUT, env=env)  # fmt: skip

    def stop() -> None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()

    stack.callback(stop)


def healthy(url: str, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not start; see the logs")


def drop(server: str, name: str) -> None:
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
