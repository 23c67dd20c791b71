"""Items read back by position (``rows.item_from_values``) are the items written, on both
engines, and the same as the mapping by column name that version snapshots still use."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from memstrata.model import Cube, MemoryItem, Source, User
from memstrata.store import rows
from memstrata.store.base import Store
from tests.store.backends import ENGINES, open_backend

pytestmark = pytest.mark.engines(*ENGINES)
FP = "test/4"


def _full(i: int) -> MemoryItem:
    """An item with every field set away from its default."""
    at = datetime(2024, 5, 1, 12, 0, i, 250000, tzinfo=timezone.utc)
    return MemoryItem(
        id=f"item-{i}", cube_id="c1", text=f"Ann went to Porto {i}", version=1, tier="long",
        type="fact", session_id="s1", user_id="u1", agent_id="a1", role="user", speaker="Ann",
        key="k", keywords=["porto"], tags=["trip", "x"], metadata={"subject": "Ann", "n": [1, {}]},
        external_id=f"ext-{i}", event_time=at, created_at=at, updated_at=at, valid_from=at,
        valid_to=at, status="activated", merged_into=None, confidence=0.5, pinned=True,
        access_count=0, last_accessed_at=None, heat=1.5,
        sources=[Source(item_id="t1", uri="file://a", span=(1, 4), role="evidence")],
        segment_id="seg", expires_at=datetime(2030, 1, 1, tzinfo=timezone.utc),
    )  # fmt: skip


@pytest.fixture
def store(engine: str, tmp_path: Path) -> Iterator[Store]:
    with open_backend(engine, tmp_path) as backend:
        opened = backend.open()
        opened.put_user(User("u1"))
        opened.put_cube(Cube("c1", "one", owner="u1", embedder=FP))
        yield opened


def test_items_read_back_by_position_equal_the_written_ones(store: Store) -> None:
    items = [_full(i) for i in range(3)] + [MemoryItem(id="plain", cube_id="c1", text="hi")]
    store.add_items(items, np.eye(4, dtype=np.float32), FP)
    got = store.get_items([i.id for i in reversed(items)], ["c1"])
    assert got == list(reversed(items))


def test_the_positional_and_named_mappings_agree() -> None:
    item = _full(7)
    row = rows.item_to_dict(item)
    in_order = {c: row[c] for c in rows.ITEM_COLUMNS}
    shuffled = dict(reversed(list(in_order.items())))  # not in column order: mapped by name
    assert rows.item_from_values(tuple(in_order.values())) == item
    assert rows.item_from_dict(in_order) == item
    assert rows.item_from_dict(shuffled) == item


def test_items_with_the_same_sources_do_not_share_a_list(store: Store) -> None:
    """Parsed sources are shared between rows that store the same text (``Source`` is frozen),
    but each item's list is its own: changing one item's sources changes no other's."""
    store.add_items([_full(1), _full(2)], np.zeros((2, 4), np.float32), FP)
    first, second = store.get_items(["item-1", "item-2"], ["c1"])
    assert (
        first.sources
        == second.sources
        == [Source(item_id="t1", uri="file://a", span=(1, 4), role="evidence")]
    )
    first.sources.append(Source(item_id="t2"))
    assert len(store.get_items(["item-2"], ["c1"])[0].sources) == 1
    assert len(store.get_items(["item-1"], ["c1"])[0].sources) == 1
