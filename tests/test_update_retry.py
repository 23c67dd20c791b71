"""An update names no version: a background write between its read and its write is retried."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from memstrata import MemoryOS
from memstrata.errors import ConflictError
from memstrata.memory import items


def _one_turn(mos: MemoryOS) -> str:
    mos.create_user("ann")
    mos.create_cube("c", owner="ann", cube_id="c")
    return mos.add("I live in Lyon.", user_id="ann", cube_id="c")[0]


def _racing(mos: MemoryOS, monkeypatch: pytest.MonkeyPatch, races: int) -> None:
    """Make the store's next ``races`` updates find the item moved by someone else first."""
    store = mos.store
    real = store.update_item
    left = [races]

    def update_item(item: Any, vector: Any, **kwargs: Any) -> Any:
        if kwargs.get("op") == "update" and left[0] > 0:
            left[0] -= 1
            (current,) = store.get_items([item.id], ["c"])
            real(replace(current, tier="mid"), None, op="move", actor=None)
        return real(item, vector, **kwargs)

    monkeypatch.setattr(store, "update_item", update_item)


def test_an_update_raced_by_a_background_move_is_applied(
    mos: MemoryOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    item_id = _one_turn(mos)
    _racing(mos, monkeypatch, races=1)
    updated = mos.update(item_id, user_id="ann", text="I live in Paris.")
    assert updated.text == "I live in Paris." and updated.tier == "mid"  # both writes kept
    assert [v.version for v in mos.history(item_id, user_id="ann")] == [1, 2, 3]


def test_an_update_raced_every_time_is_a_conflict(
    mos: MemoryOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    item_id = _one_turn(mos)
    _racing(mos, monkeypatch, races=items.UPDATE_ATTEMPTS)
    with pytest.raises(ConflictError):
        mos.update(item_id, user_id="ann", text="I live in Paris.")
    assert mos.get(item_id, user_id="ann").text == "I live in Lyon."
