"""Search latency while one maximal legal batch is added over REST (issue 11, finding 2).

Run from the repository root, in the project's virtual environment::

    python bench/bulk.py                      # both shapes, a new database in a temporary folder
    python bench/bulk.py --shape long --out bench/bulk.json

The script starts ``python -m memstrata --db PATH serve`` on a free 127.0.0.1 port (a fresh
``MEMSTRATA_ADMIN_KEY``; every other setting from the environment as usual, ``workers`` 1 by
default), makes a user, a key and a cube of ``--seed`` short turns, and waits for their
consolidation.  Then, per shape of batch:

* **baseline**: one client searches (``POST /search``, top_k 10, a pause of ``--pause`` s between
  searches) for ``--baseline-s`` seconds with nothing else running;
* **during**: a second client sends one ``POST /memories`` holding the largest batch the limits
  allow, and the first keeps searching until that add is answered.

Shapes: ``long`` is ``MAX_ADD_CHARS`` of content in messages of 2,048 characters (all that e5
reads of a text: the most embedding work one request may ask for); ``turns`` is ``MAX_MESSAGES``
messages of ``MAX_ADD_CHARS / MAX_MESSAGES`` characters.  Figures: the add's duration and status,
and search count, p50, p95 and max latency (ms, wall-clock, seen by the client), baseline and
during.  ``--out`` writes them as JSON.  ``--root DIR`` runs the server from another checkout
(e.g. a ``git worktree`` of an older commit, to compare).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from memstrata.limits import MAX_ADD_CHARS, MAX_MESSAGES

WORDS = (
    "porto lisbon garden kitchen river mountain painting music guitar sister brother dog cat "
    "weekend holiday support group museum recipe bicycle library concert ocean forest"
).split()
QUESTIONS = [
    "Where did my sister move?",
    "What did we cook last weekend?",
    "Which concert did we go to?",
    "What is the dog called?",
    "When was the museum trip?",
]


def text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of sentences made of ``WORDS`` (cut to ``size``)."""
    out: list[str] = []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize()
        out.append(sentence + ".")
        length += len(sentence) + 2
    return " ".join(out)[:size]


def batch(shape: str, rng: random.Random) -> list[dict[str, str]]:
    """The largest legal batch of ``shape`` (see the module docstring)."""
    if shape == "long":
        count, size = MAX_ADD_CHARS // 2048, 2048
    else:
        count, size = MAX_MESSAGES, MAX_ADD_CHARS // MAX_MESSAGES
    return [{"role": "user", "name": "Ann", "content": text(rng, size)} for _ in range(count)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summary(latencies: list[float]) -> dict[str, Any]:
    ms = [x * 1000 for x in latencies]
    return {
        "searches": len(ms),
        "p50_ms": round(pct(ms, 0.50), 1),
        "p95_ms": round(pct(ms, 0.95), 1),
        "max_ms": round(max(ms), 1) if ms else None,
    }


def search_until(http: httpx.Client, stop: threading.Event, pause: float) -> list[float]:
    """Search (one question after another) until ``stop`` is set; the latencies in seconds."""
    latencies: list[float] = []
    n = 0
    while not stop.is_set():
        started = time.perf_counter()
        answered = http.post("/search", json={"query": QUESTIONS[n % len(QUESTIONS)], "top_k": 10})
        answered.raise_for_status()
        latencies.append(time.perf_counter() - started)
        n += 1
        stop.wait(pause)
    return latencies


def measure(url: str, key: str, cube: str, shape: str, args: argparse.Namespace) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=3600) as http:
        stop = threading.Event()
        timer = threading.Timer(args.baseline_s, stop.set)
        timer.start()
        baseline = search_until(http, stop, args.pause)
        messages = batch(shape, random.Random(args.seed_value))
        body = json.dumps({"cube_id": cube, "messages": messages})
        result: dict[str, Any] = {}

        def add() -> None:
            with httpx.Client(base_url=url, headers=headers, timeout=3600) as writer:
                started = time.perf_counter()
                answered = writer.post(
                    "/memories", content=body, headers={"Content-Type": "application/json"}
                )
                result.update(add_s=round(time.perf_counter() - started, 1),
                              status=answered.status_code)  # fmt: skip
                stop.set()

        stop = threading.Event()
        writer = threading.Thread(target=add)
        writer.start()
        during = search_until(http, stop, args.pause)
        writer.join()
    return {
        "shape": shape,
        "messages": len(messages),
        "characters": sum(len(m["content"]) for m in messages),
        "body_bytes": len(body),
        **result,
        "baseline": summary(baseline),
        "during": summary(during),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(db: Path, admin_key: str, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "MEMSTRATA_ADMIN_KEY": admin_key}
    command = [sys.executable, "-m", "memstrata", "--db", str(db), "serve", "--port", str(port)]
    log = open(db.with_suffix(".server.log"), "wb")  # noqa: SIM115 - lives as long as the server
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return server, url
        except httpx.HTTPError:
            time.sleep(0.2)
    server.terminate()
    raise RuntimeError("the server did not start")


def seed(url: str, admin_key: str, turns: int) -> tuple[str, str]:
    """A user with a key and a cube of ``turns`` short turns, consolidated; (key, cube id)."""
    rng = random.Random(7)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin_key}"}) as admin:
        admin.post("/users", json={"user_id": "bench"}).raise_for_status()
        key = admin.post("/users/bench/keys", json={"label": "bulk"}).json()["key"]
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600
    ) as http:
        cube = http.post("/mem_cubes", json={"name": "bulk"}).json()["cube_id"]
        for _ in range(turns // 100):
            messages = [{"name": "Ann", "content": text(rng, 120)} for _ in range(100)]
            http.post("/memories", json={"cube_id": cube, "messages": messages}).raise_for_status()
        http.post("/tasks/wait", json={"cube_id": cube, "timeout_s": 60})
    return key, cube


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=("long", "turns", "both"), default="both")
    parser.add_argument("--seed", type=int, default=500, help="turns in the cube first")
    parser.add_argument("--baseline-s", type=float, default=15.0)
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between searches")
    parser.add_argument("--seed-value", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="run the server from this checkout"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memstrata-bulk-") as folder:
        admin_key = "ms_" + secrets.token_urlsafe(24)
        server, url = start_server(Path(folder) / "bulk.db", admin_key, args.root)
        try:
            key, cube = seed(url, admin_key, args.seed)
            shapes = ("long", "turns") if args.shape == "both" else (args.shape,)
            results = [measure(url, key, cube, shape, args) for shape in shapes]
        finally:
            server.terminate()
            server.wait(30)
    for r in results:
        print(json.dumps(r))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
