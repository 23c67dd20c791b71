"""Reads heat segments up through the scheduler, and a topic read often is promoted."""

from __future__ import annotations

import pytest

import memstrata.tiers.tasks
from memstrata import MemoryOS
from memstrata.errors import ItemNotFound
from memstrata.filters import Filters
from memstrata.model import utcnow
from memstrata.tiers.mid import record_visits


def test_reads_become_visits_that_heat_and_promote_a_segment(
    mos: MemoryOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memstrata.tiers.tasks, "READS_FLUSH_S", 0.0)
    mos.create_user("u")
    settings = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 21.5,
                "alpha": 10.0}  # fmt: skip
    cube = mos.create_cube("c", owner="u", settings=settings).cube_id
    mos.add([{"name": "Ann", "content": "I work as a baker in Graz."},
             {"name": "Ann", "content": "The weather is fine."}], user_id="u", cube_id=cube)  # fmt: skip
    (segment,) = mos.store.list_items(cube, Filters(types=("segment",)))
    cold = segment.heat or 0.0
    # the rules read the attribute at once (tiers.long.note); the promotion has not happened
    assert (
        cold < 21.5 and mos.store.count_items(cube, Filters(tiers=("long",), types=("fact",))) == 0
    )
    assert {p.status for p in mos.store.list_items(cube, Filters(tiers=("mid",)))} == {"generated"}
    mos.search("baker", user_id="u", filters={"type": "turn", "tier": "mid"}, top_k=1)
    (segment,) = mos.store.list_items(cube, Filters(types=("segment",)))
    assert segment.access_count == 1 and segment.heat is not None and segment.heat > cold
    page = mos.store.list_items(cube, Filters(tiers=("mid",), types=("turn",)))[0]
    assert page.access_count == 1 and page.last_accessed_at is not None
    mos.search("baker", user_id="u", filters={"type": "turn", "tier": "mid"}, top_k=1)
    assert mos.wait(cube, timeout=30)
    # two visits (2 × α = 20) + one page + recency (1) = 22 ≥ 21.5: promoted to the long tier
    assert mos.store.count_items(cube, Filters(tiers=("long",), types=("profile",))) == 1
    assert mos.get(page.id, user_id="u").status == "activated"


def test_a_segment_gone_since_it_was_read_is_skipped_not_retried(
    mos: MemoryOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    mos.create_user("u")
    settings = {"working_capacity": 1, "similarity_threshold": 0.0}
    cube = mos.create_cube("c", owner="u", settings=settings).cube_id
    mos.add([{"name": "Ann", "content": "I work as a baker in Graz."},
             {"name": "Ann", "content": "The weather is fine."}], user_id="u", cube_id=cube)  # fmt: skip
    (segment,) = mos.store.list_items(cube, Filters(types=("segment",)))
    page = mos.store.list_items(cube, Filters(tiers=("mid",), types=("turn",)))[0]

    def gone(*args: object, **kwargs: object) -> None:
        raise ItemNotFound(segment.id)  # as if its cube were deleted between the two reads

    monkeypatch.setattr(mos.store, "update_item", gone)
    assert record_visits(mos.store, cube, {page.id: 1}, utcnow()) == []
    monkeypatch.undo()
    (page,) = mos.store.get_items([page.id], [cube])
    assert page.access_count == 1  # the read still counts, once
