"""The SQLite engine's exact dense scan ranks exactly the rows passing the filters, whatever
share of the cube they are: most rows (scored by one product over every row, then picked),
few rows (copied, then scored) or all of them; checked against a scan written here."""

from __future__ import annotations

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
