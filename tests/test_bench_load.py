"""``bench/load.py`` works: a two-second run against a copy of a tiny database.

One run (10–20 s: two processes start and load the embedder); it takes the ``--from`` path,
which also shows that the source file is left alone.  The new-database path differs only in
preparing its user through the API."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from memstrata import MemoryOS

ROOT = Path(__file__).resolve().parent.parent
TIME_LIMIT_S = 90


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_short_run_against_a_copy_has_no_errors_and_leaves_the_source_alone(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source" / "core.db"
    source.parent.mkdir()
    with MemoryOS.open(str(source), workers=0) as memory:  # as bench/core.py leaves one
        memory.create_user("bench")
        memory.create_cube("benchmark", owner="bench", cube_id="bench-e5")
        turns = [{"name": "Ann", "content": f"I went hiking in place {n}."} for n in range(20)]
        memory.add(turns, user_id="bench", cube_id="bench-e5")
    before = {p.name: _digest(p) for p in source.parent.iterdir()}
    out = tmp_path / "load.json"
    command = [
        sys.executable, "bench/load.py", "--db", str(tmp_path / "copy.db"), "--from", str(source),
        "--clients", "3", "--duration", "2", "--mix", "1:2", "--out", str(out),
    ]  # fmt: skip
    run = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=TIME_LIMIT_S, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["errors"] == 0 and result["error_samples"] == []
    assert result["add"]["count"] > 0 and result["search"]["count"] > 0
    assert result["search"]["p95_ms"] >= result["search"]["p50_ms"] > 0
    assert result["items_at_start"] >= 20
    assert "search" in run.stdout and "errors: 0" in run.stdout
    assert {p.name: _digest(p) for p in source.parent.iterdir()} == before
