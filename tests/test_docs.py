"""Documentation that cannot drift: every setting is documented."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from memstrata.config import Settings

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_setting_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(Settings) if f"| `{f.name}` |" not in text]
    assert missing == []


def test_the_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    monkeypatch.chdir(tmp_path)  # the example writes memory.db in the working directory
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "memory.db").exists()
