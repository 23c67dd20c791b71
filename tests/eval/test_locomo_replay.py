"""``bench/locomo_replay.py``: ingest once, replay the questions frozen, score as the harness.

On the tiny original fixture in LoCoMo's format: the first run ingests into ``--dir`` and
replays, the second reuses the kept database; both give the figures of ``memstrata eval
locomo`` on the same file, and no replay writes to the kept database."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from memstrata.cli import cli

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "locomo_mini.json"
RECALLS = ("recall@10", "recall@1000tok", "recall@2000tok", "questions")


def _replay(folder: Path, out: Path) -> dict[str, object]:
    command = [sys.executable, str(ROOT / "bench" / "locomo_replay.py"), "--data", str(FIXTURE),
               "--dir", str(folder), "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "single-hop" in done.stdout
    return dict(json.loads(out.read_text()))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_replay_reuses_its_databases_changes_nothing_and_scores_as_eval_locomo(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "dbs"
    first = _replay(folder, tmp_path / "a.json")
    (db,) = folder.glob("*/locomo.db")
    kept = _digest(db)
    record = json.loads((db.parent / "ingest.json").read_text())
    second = _replay(folder, tmp_path / "b.json")
    assert _digest(db) == kept  # replays ask copies; the kept database is not written
    assert json.loads((db.parent / "ingest.json").read_text()) == record  # reused, not redone
    assert second["questions"] == first["questions"]  # question by question, the same marks
    assert second["by_category"] == first["by_category"]
    assert len(first["questions"]) == 4  # type: ignore[arg-type]

    out = tmp_path / "e2e.json"
    result = CliRunner().invoke(cli, ["eval", "locomo", "--data", str(FIXTURE), "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    e2e = json.loads(out.read_text())
    for metric in RECALLS:
        assert first["overall"][metric] == e2e["overall"][metric]  # type: ignore[index]
