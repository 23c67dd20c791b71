"""Shared fixtures: a real SQLite file per test and the real default embedder (e5)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import MemoryOS

TABLES = ("users", "cubes", "grants", "items", "item_versions", "vectors", "events", "items_fts")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def mos(db_path: Path) -> Iterator[MemoryOS]:
    """A MemoryOS running background tasks inline (``workers=0``), so tests are deterministic."""
    with MemoryOS.open(str(db_path), workers=0) as m:
        yield m


@pytest.fixture
def alice_cube(mos: MemoryOS) -> str:
    """User ``alice`` owning cube ``notes``; user ``bob`` with no grant."""
    mos.create_user("alice", name="Alice")
    mos.create_user("bob")
    return mos.create_cube("notes", owner="alice", cube_id="notes").cube_id


def row_counts(path: Path) -> dict[str, int]:
    """Rows per table, read through a separate connection: proof that nothing was written."""
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()
