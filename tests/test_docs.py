"""Documentation that cannot drift: every setting is documented."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memstrata.config import Settings

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_setting_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(Settings) if f"| `{f.name}` |" not in text]
    assert missing == []
