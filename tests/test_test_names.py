"""The suite collects as one: pytest imports a test module by its file name when its folder is
not a package, so two such modules of one name stop the whole run at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def _module_name(path: Path) -> str:
    """The name pytest (prepend import mode) imports ``path`` under: dotted from the first folder
    of its package chain, or its bare name outside a package."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_no_two_test_modules_share_an_import_name() -> None:
    names = Counter(_module_name(p) for p in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
