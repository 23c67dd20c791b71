"""The security regression suite cannot lose a replay: docs/security.md's table "The attacks,
replayed" names, for every finding of every round, the test that replays it; each must exist.
The second round's seventeen findings must all be there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (\d+) \| (\d+) \| .* \| `(tests/[\w/]+\.py)::(\w+)` \|$", re.MULTILINE)


def _replays() -> list[tuple[int, int, str, str]]:
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    return [(int(r), int(n), path, name) for r, n, path, name in ROW.findall(text)]


def _tests(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_finding_names_a_test_that_exists() -> None:
    replays = _replays()
    assert sorted(n for r, n, _, _ in replays if r == 2) == list(range(1, 18))
    assert sorted(n for r, n, _, _ in replays if r == 1) == list(range(1, 8))
    missing = [f"{path}::{name}" for _, _, path, name in replays if name not in _tests(path)]
    assert missing == []
