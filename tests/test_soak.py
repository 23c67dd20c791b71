"""``bench/soak.py`` in its short form: 8 clients for 20 s (after a 10 s warm-up) mixing adds,
searches, contexts, updates and erasures against ``memstrata serve`` on loopback; and two of the
pieces the soak relies on: the server's bound on malloc arenas, and the soak client's retry of an
update that lost a race with a background write.

Every request must succeed and the server's memory must stay bounded.  The growth limit here is
looser than the full form's 10 % (``docs/benchmarks.md``): over 20 s the database's page caches
and the allocator are still filling, a larger share of so short a run than of five minutes.
The server must also stop cleanly at the end (exit status 0).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memstrata.cli.serve import bound_malloc_arenas

ROOT = Path(__file__).resolve().parent.parent
TIME_LIMIT_S = 180
SHORT_FORM = ["--clients", "8", "--duration", "20", "--warm-up", "10", "--users", "2",
              "--seed-turns", "30", "--max-rss-growth", "20"]  # fmt: skip


def test_a_short_soak_has_no_errors_and_bounded_memory(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    command = [sys.executable, "bench/soak.py", "--db", str(tmp_path / "soak.db"),
               *SHORT_FORM, "--out", str(out)]  # fmt: skip
    run = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=TIME_LIMIT_S, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["errors"] == 0 and result["error_samples"] == []
    for op in ("add", "search", "context", "update", "erase"):
        assert result[op]["count"] > 0, op
        assert result[op]["p95_ms"] >= result[op]["p50_ms"] > 0, op
    rss = result["server_rss"]
    # The end is sampled after the clients stop, while background tasks may still run: it can be
    # the highest sample, so only the growth is bounded.
    assert rss["growth_pct"] < 20
    assert result["server_exit_status"] == 0
    assert "errors: 0" in run.stdout


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc"
)
def test_the_server_bounds_malloc_arenas_unless_the_user_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert bound_malloc_arenas() is True
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert bound_malloc_arenas() is False


def test_a_stale_read_409_is_told_from_other_conflicts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from load import is_stale_read

    def answer(status: int, code: str, message: str) -> httpx.Response:
        return httpx.Response(status, json={"error": {"code": code, "message": message}})

    stale = "item '01X' changed since it was read (version 2, not 1)"
    assert is_stale_read(answer(409, "conflict", stale))
    assert not is_stale_read(answer(409, "conflict", "item '01X' is deleted: it cannot change"))
    assert not is_stale_read(answer(404, "not_found", stale))
    assert not is_stale_read(httpx.Response(409, text="not json"))
