"""``bench/rest_overhead.py`` works: a few questions over HTTP and in process, on a copy of a
tiny database (one server process starts and loads the embedder: 10-20 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memstrata import MemoryOS

ROOT = Path(__file__).resolve().parent.parent


def test_a_short_run_reports_both_sides_and_their_difference(tmp_path: Path) -> None:
    source = tmp_path / "source" / "core.db"
    source.parent.mkdir()
    with MemoryOS.open(str(source), workers=0) as memory:  # as bench/core.py leaves one
        memory.create_user("bench")
        memory.create_cube("benchmark", owner="bench", cube_id="bench-e5")
        turns = [{"name": "Ann", "content": f"I went hiking in place {n}."} for n in range(20)]
        memory.add(turns, user_id="bench", cube_id="bench-e5")
    out = tmp_path / "rest.json"
    command = [sys.executable, "bench/rest_overhead.py", "--db", str(tmp_path / "copy.db"),
               "--from", str(source), "--queries", "3", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(out.read_text())
    assert found["questions"] == 3
    assert found["http_p50_ms"] > 0 and found["in_process_p50_ms"] > 0
    assert isinstance(found["overhead_p50_ms"], float)
    # CPU time beside wall time (the machine is shared): the client's, the server's threads'
    assert found["client_cpu_p50_ms"] > 0 and found["in_process_cpu_p50_ms"] > 0
    if sys.platform.startswith("linux"):
        assert found["server_cpu_p50_ms"] > 0 and found["health_cpu_p50_ms"] > 0
        assert isinstance(found["cpu_overhead_p50_ms"], float)
