"""What the adapter tests share: the framework import (skipped locally without the extra, a
failure in CI, which installs every extra) and running a docs page's example."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "integrations"


def framework(module: str, extra: str) -> ModuleType:
    """``module``, or a skip naming the extra to install; in CI (MEMSTRATA_TEST_REQUIRE_SERVICES)
    a missing framework is an error, never a skip."""
    if os.environ.get("MEMSTRATA_TEST_REQUIRE_SERVICES"):
        return importlib.import_module(module)
    return pytest.importorskip(
        module, reason=f"{module} is not installed: pip install 'memstrata[{extra}]'"
    )


def run_example(page: str) -> None:
    """Run the one ``python`` block of docs/integrations/``page`` (in the working directory)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    exec(compile(code, f"docs/integrations/{page}", "exec"), {"__name__": "example"})
