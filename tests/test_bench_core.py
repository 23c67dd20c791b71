"""``bench/core.py`` reports own work, its stages and the floor (issue 29), with the keys the
issue's outside check reads: a run on a tiny new cube (30 turns, 3 questions)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.services import fresh_database

ROOT = Path(__file__).resolve().parent.parent


def _tiny_run(db: str, out: Path) -> dict[str, Any]:
    """``bench/core.py`` on 30 turns and 3 questions into ``db``: the last size's figures."""
    command = [sys.executable, "bench/core.py", "--embedder", "e5", "--n", "30", "--no-tiers",
               "--db", db, "--queries", "3", "--adds", "0",
               "--raw-sample", "8", "--workers", "0", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    size: dict[str, Any] = json.loads(out.read_text())["sizes"][-1]
    return size


def test_a_tiny_run_reports_own_work_stages_and_the_floor(tmp_path: Path) -> None:
    size = _tiny_run(str(tmp_path / "core.db"), tmp_path / "core.json")
    _has_every_figure(size)


def test_the_same_run_on_postgresql(tmp_path: Path) -> None:
    """``--db postgresql://…``: the same keys, the floor measured by ``PostgresFloor``."""
    with fresh_database() as dsn:
        size = _tiny_run(dsn, tmp_path / "core.json")
    _has_every_figure(size)
    assert size["turns"] == 30
    assert size["db_mb"] > 0


def _has_every_figure(size: dict[str, Any]) -> None:
    for key in ("search_p50_ms", "search_p95_ms", "own_p50_ms", "own_p95_ms", "floor_p50_ms",
                "floor_fts_p50_ms", "floor_dense_p50_ms", "floor_fetch_p50_ms",
                "own_cpu_p50_ms", "floor_cpu_p50_ms", "own_over_floor_p50", "plain_p50_ms",
                "plain_cpu_p50_ms"):  # fmt: skip
        assert size[key] > 0, key
    assert size["floor_dense"] == "exact"
    assert {"keyword", "dense", "fetch"} <= set(size["stages"])
    assert all(v["wall_ms"] >= 0 and v["cpu_ms"] >= 0 for v in size["stages"].values())
    assert size["own_p50_ms"] == size["search_no_embed_p50_ms"]


def test_grow_copies_a_cube_with_its_text_index_and_vectors(tmp_path: Path) -> None:
    """``bench/grow.py`` on a tiny cube: every copy has its full-text row and a unit vector,
    its superseded items point at the copy's successors, and ``core.py`` measures the result
    without ingesting anything."""
    db = tmp_path / "core.db"
    _tiny_run(str(db), tmp_path / "core.json")
    before = sqlite3.connect(db).execute("SELECT count(*) FROM items").fetchone()[0]
    target = 2 * before + 5
    command = [sys.executable, "bench/grow.py", "--db", str(db), "--n", str(target)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    conn = sqlite3.connect(db)
    count = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    assert count == target
    assert conn.execute("SELECT count(*) FROM items_fts").fetchone()[0] == count
    assert conn.execute("SELECT count(DISTINCT id) FROM items").fetchone()[0] == count
    vectors = [np.frombuffer(v, np.float32) for (v,) in conn.execute("SELECT vector FROM vectors")]
    assert len(vectors) == count and all(abs(np.linalg.norm(v) - 1) < 1e-4 for v in vectors)
    dangling = (
        "SELECT count(*) FROM items WHERE merged_into IS NOT NULL "
        "AND merged_into NOT IN (SELECT id FROM items)"
    )
    assert conn.execute(dangling).fetchone()[0] == 0
    conn.close()
    size = _tiny_run(str(db), tmp_path / "again.json")
    assert size["turns"] == count and size["own_p50_ms"] > 0
