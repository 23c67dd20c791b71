"""The keyword channel when the filters reject most of the best matches (issue 29): a name's
superseded facts, short and so ranked first by BM25, outnumber its live turns many times.
The channel still returns the live matches only, all of them, best first, on both engines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memstrata.filters import Filters
from memstrata.model import Cube, MemoryItem, User
from memstrata.store.base import Store
from tests.store.backends import ENGINES, open_backend

pytestmark = pytest.mark.engines(*ENGINES)
FP = "test/4"


@pytest.fixture
def store(engine: str, tmp_path: Path) -> Iterator[Store]:
    with open_backend(engine, tmp_path) as backend:
        opened = backend.open()
        opened.put_user(User("u1"))
        opened.put_cube(Cube("c1", "one", owner="u1", embedder=FP))
        yield opened


def test_live_matches_are_found_behind_many_rejected_better_ones(store: Store) -> None:
    merged = [MemoryItem(id=f"m{n:03d}", cube_id="c1", text=f"Maria lives in town {n}",
                         status="merged", type="profile", tier="long")
              for n in range(300)]  # fmt: skip
    filler = " and then we talked about the weather for a long while"
    live = [MemoryItem(id=f"t{n}", cube_id="c1", text=f"Maria told me about it{filler * n}")
            for n in range(1, 6)]  # fmt: skip
    items = merged + live
    store.add_items(items, np.ones((len(items), 4), np.float32), FP)
    found = store.keyword_search("Where does Maria live?", ["c1"], Filters(), 3)
    assert [i for i, _ in found] == ["t1", "t2", "t3"]  # shorter first: higher BM25
    assert found[0][1] > found[1][1] > found[2][1]
    every = store.keyword_search("Where does Maria live?", ["c1"], Filters(), 50)
    assert [i for i, _ in every] == ["t1", "t2", "t3", "t4", "t5"]
