"""The README's quickstart works as printed: its server command, then its curl session.

The server runs as the README starts it (``memstrata serve`` with ``MEMSTRATA_ADMIN_KEY``), on a
free port instead of 8765; the curl lines run unchanged but for that port.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
PRINTED = "http://127.0.0.1:8765"


def quickstart_blocks() -> tuple[str, list[str]]:
    """The server command line and the curl lines of the README's quickstart."""
    section = README.read_text(encoding="utf-8").split("## Quickstart", 1)[1]
    run, session = re.findall(r"```sh\n(.*?)```", section, re.S)[:2]
    return run.strip(), [line for line in session.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    run, _ = quickstart_blocks()
    serve = run.split("&&")[-1].split()
    env_var, key = serve[0].split("=", 1)
    assert env_var == "MEMSTRATA_ADMIN_KEY" and serve[1:3] == [".venv/bin/memstrata", "serve"]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    env[env_var] = key
    args = [*serve[3:], "--port", str(port)]
    args[args.index("--db") + 1] = str(tmp_path / "memstrata.db")
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "memstrata", "serve", *args], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(url + "/health", timeout=1).is_success:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.mark.skipif(shutil.which("curl") is None, reason="the quickstart uses curl")
def test_the_quickstart_curl_session_works_as_printed(server: str) -> None:
    _, lines = quickstart_blocks()
    assert len(lines) == 3 and all(line.startswith("curl ") for line in lines)
    answers = []
    for line in lines:
        assert PRINTED in line
        done = subprocess.run(
            shlex.split(line.replace(PRINTED, server)), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        answers.append(json.loads(done.stdout))
    cube, added, found = answers
    assert cube["cube_id"] == "notes" and cube["owner"] == "admin"
    assert len(added["ids"]) == 1
    assert "Lisbon" in found["hits"][0]["text"]
