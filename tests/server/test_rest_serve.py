"""``memstrata serve`` as a user runs it: a process that prints the first admin key once."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

STARTUP_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serve(db: Path, log: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``memstrata --db DB serve`` until its /health answers; stop it with Ctrl-C after."""
    port = _free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    with log.open("a") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "memstrata", "--db", str(db), "serve", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**clean, **env},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _healthy(url):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield process, url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        finally:
            process.kill()
            if process.stdout is not None:
                process.stdout.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _printed(process: subprocess.Popen[str]) -> str:
    """What the server has written to stdout so far (the key, uvicorn's access log)."""
    assert process.stdout is not None
    out = ""
    while select.select([process.stdout], [], [], 0.5)[0]:
        line = process.stdout.readline()
        if not line:
            break
        out += line
    return out


def test_serve_prints_the_first_admin_key_once_and_serves_it(tmp_path: Path) -> None:
    db, log = tmp_path / "served.db", tmp_path / "server.log"
    with _serve(db, log) as (process, url):
        (line,) = [x for x in _printed(process).splitlines() if "API key" in x]
        assert "shown only this once" in line
        key = line.split(": ")[-1].strip()
        me = httpx.get(f"{url}/users/me", headers={"Authorization": f"Bearer {key}"})
        assert me.json()["role"] == "admin"
        assert httpx.get(f"{url}/users/me").status_code == 401
    assert process.returncode == 0, log.read_text()
    with _serve(db, log) as (process, url):
        assert "API key" not in _printed(process)  # not shown again, and it still works
        me = httpx.get(f"{url}/users/me", headers={"Authorization": f"Bearer {key}"})
        assert me.status_code == 200
    assert "Uvicorn running on http://127.0.0.1" in log.read_text()


def test_serve_uses_a_configured_admin_key_without_printing_it(tmp_path: Path) -> None:
    key = "configured-admin-key-0123456789"
    with _serve(tmp_path / "keyed.db", tmp_path / "server.log", MEMSTRATA_ADMIN_KEY=key) as (
        process,
        url,
    ):
        assert "API key" not in _printed(process)
        me = httpx.get(f"{url}/users/me", headers={"Authorization": f"Bearer {key}"})
        assert me.json()["user_id"] == "admin"
