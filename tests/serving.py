"""``memstrata serve`` in a child process, for the tests that stop or kill it
(``test_shutdown``, ``test_kill``): started on a free loopback port with a known admin key, and
killed if a test leaves it running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

STARTUP_S = 90.0
ADMIN_KEY = "ms_test_admin_key_0123456789abcdef"


@dataclass
class Served:
    """A running server: its process, base URL and the admin's bearer header."""

    process: subprocess.Popen[bytes]
    url: str
    headers: dict[str, str]

    def stop(self, signum: int, within_s: float) -> int | None:
        """Send ``signum``; the exit status, or None when it had not exited within ``within_s``."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(within_s)
        except subprocess.TimeoutExpired:
            return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**settings: str) -> dict[str, str]:
    """This environment without the machine's MEMSTRATA_* settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    return {**env, "MEMSTRATA_ADMIN_KEY": ADMIN_KEY, **settings}


@contextmanager
def served(db: str | Path, log: Path, *args: str, **settings: str) -> Iterator[Served]:
    """``memstrata --db DB serve ARGS`` until its /health answers (``settings``: MEMSTRATA_*
    values).

    Whatever the test did, the process is gone when the block ends (killed if need be).
    """
    port = free_port()
    command = [sys.executable, "-m", "memstrata", "--db", str(db), "serve", "--port", str(port),
               *args]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=clean_env(**settings)
        )
    server = Served(process, f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {ADMIN_KEY}"})
    try:
        wait_healthy(server, log)
        yield server
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def wait_healthy(server: Served, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while True:
        assert server.process.poll() is None, log.read_text(errors="replace")
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.1)
