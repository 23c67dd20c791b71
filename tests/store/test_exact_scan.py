"""The SQLite engine's exact dense scan ranks exactly the rows passing the filters, whatever
share of the cube they are: most rows (scored by one product over every row, then picked),
few rows (copied, then scored) or all of them; checked against a scan written here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memstrata.filters import Filters
from memstrata.model import Cube, MemoryItem, User
from memstrata.store.sqlite import SQLiteStore

DIM = 32
FP = "test/32"


@pytest.mark.parametrize("merged_share", [0.0, 0.1, 0.5, 0.9])
def test_the_exact_scan_ranks_the_passing_rows_only(tmp_path: Path, merged_share: float) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((300, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    merged = rng.random(300) < merged_share
    store = SQLiteStore(tmp_path / "m.db")
    try:
        store.put_user(User("u"))
        store.put_cube(Cube("c", "c", owner="u", embedder=FP))
        items = [
            MemoryItem(id=f"i{n:03d}", cube_id="c", text=f"turn {n}",
                       status="merged" if merged[n] else "generated")
            for n in range(300)
        ]  # fmt: skip
        store.add_items(items, vectors, FP)
        for query in rng.standard_normal((5, DIM)).astype(np.float32):
            found = store.vector_search(query, ["c"], Filters(), 20)
            live = np.flatnonzero(~merged)
            scores = vectors[live] @ query
            best = live[np.argsort(-scores, kind="stable")][:20]
            assert [i for i, _ in found] == [f"i{n:03d}" for n in best]
            assert [s for _, s in found] == pytest.approx(sorted(scores, reverse=True)[:20])
    finally:
        store.close()


def test_the_rows_passing_are_read_again_after_any_change(tmp_path: Path) -> None:
    """The mirror keeps the rows passing a search's filters for the searches after it: a
    change to a row's status, and a new row, are seen by the next search with the same
    filters (and another process's change too: the mirror refreshes by change sequence)."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = SQLiteStore(tmp_path / "m.db")
    other = SQLiteStore(tmp_path / "m.db")
    try:
        store.put_user(User("u"))
        store.put_cube(Cube("c", "c", owner="u", embedder=FP))
        items = [MemoryItem(id=f"i{n:02d}", cube_id="c", text=f"turn {n}") for n in range(39)]
        store.add_items(items, vectors[:39], FP)
        query = vectors[5]
        assert store.vector_search(query, ["c"], Filters(), 1)[0][0] == "i05"
        assert store.vector_search(query, ["c"], Filters(), 1)[0][0] == "i05"  # kept rows
        first = store.get_items(["i05"], ["c"])[0]
        other.update_item(replace(first, status="merged"), None, op="merge", actor="u")
        assert "i05" not in dict(store.vector_search(query, ["c"], Filters(), 39))
        store.add_items([MemoryItem(id="i39", cube_id="c", text="new")], vectors[[5]], FP)
        assert store.vector_search(query, ["c"], Filters(), 1)[0][0] == "i39"
    finally:
        other.close()
        store.close()
