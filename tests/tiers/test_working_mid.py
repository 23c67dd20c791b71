"""Working-tier overflow and mid-tier segments, with the real store and embedder (e5)."""

from __future__ import annotations

from typing import Any

import pytest

from memstrata import MemoryOS
from memstrata.embed import fingerprint
from memstrata.filters import Filters
from memstrata.tiers.mid import SEGMENTS
from memstrata.tiers.working import consolidate

HIKING = [
    "We went hiking in the Alps and climbed to a mountain hut.",
    "The mountain trail was steep but the view from the hut was amazing.",
    "Next summer we want to hike the alpine trail again, maybe to the glacier.",
]
COOKING = [
    "I baked sourdough bread with a new starter this morning.",
    "The sourdough starter needs feeding with flour and water every day.",
]


def setup(mos: MemoryOS, **settings: Any) -> str:
    mos.create_user("u")
    return mos.create_cube("c", owner="u", settings=settings).cube_id


def add(mos: MemoryOS, cube: str, texts: list[str], session: str = "s1") -> list[str]:
    messages = [
        {"content": t, "timestamp": f"2024-05-01T10:{i:02d}:00Z"} for i, t in enumerate(texts)
    ]
    return mos.add(messages, user_id="u", cube_id=cube, session_id=session)


def run(mos: MemoryOS, cube: str) -> list[Any]:
    return consolidate(mos.store, cube, fingerprint(mos.embedder))


def test_overflow_moves_the_oldest_turns_keeping_ids(mos: MemoryOS) -> None:
    cube = setup(mos, working_capacity=3)
    ids = add(mos, cube, HIKING + COOKING)
    other = add(mos, cube, ["a different session"], session="s2")
    run(mos, cube)
    tiers = {i: mos.get(i, user_id="u").tier for i in ids + other}
    assert [tiers[i] for i in ids] == ["mid", "mid", "working", "working", "working"]
    assert tiers[other[0]] == "working"  # sessions overflow separately
    page = mos.get(ids[0], user_id="u")
    assert page.segment_id and page.keywords and page.text == HIKING[0]
    moves = [e for e in mos.store.events(item_id=ids[0]) if e.op == "move"]
    assert len(moves) == 1 and moves[0].after == {"tier": "mid", **moves[0].after}
    assert run(mos, cube) == []  # idempotent: nothing overflows any more
    assert mos.search("mountain hut", user_id="u", top_k=1)[0].item.id in ids[:2]


def test_similar_pages_join_and_dissimilar_ones_start_segments(mos: MemoryOS) -> None:
    cube = setup(mos, working_capacity=1, similarity_threshold=0.86)
    ids = add(mos, cube, HIKING + COOKING + ["last turn stays in working memory"])
    run(mos, cube)
    segment_of = {i: mos.get(i, user_id="u").segment_id for i in ids[:5]}
    assert segment_of[ids[0]] == segment_of[ids[1]] == segment_of[ids[2]]
    assert segment_of[ids[3]] == segment_of[ids[4]] != segment_of[ids[0]]
    segments = mos.store.list_items(cube, SEGMENTS)
    assert len(segments) == 2
    hiking = next(s for s in segments if s.id == segment_of[ids[0]])
    assert [s.item_id for s in hiking.sources] == ids[:3]
    assert "mountain" in hiking.keywords or "hut" in hiking.keywords
    assert HIKING[0].split(".")[0] in hiking.text  # extractive summary
    # the centroid is the normalised mean of the pages' vectors
    pages = mos.store.get_vectors(ids[:3], [cube])
    mean = pages.sum(axis=0) / (pages.sum(axis=0) ** 2).sum() ** 0.5
    assert mos.store.get_vectors([hiking.id], [cube])[0] == pytest.approx(mean, abs=1e-4)


@pytest.mark.parametrize(("threshold", "segments"), [(0.0, 1), (2.0, 5)])
def test_threshold_extremes(mos: MemoryOS, threshold: float, segments: int) -> None:
    cube = setup(mos, working_capacity=1, similarity_threshold=threshold)
    add(mos, cube, [*HIKING, *COOKING, "stays"])
    run(mos, cube)
    assert mos.store.count_items(cube, SEGMENTS) == segments


def test_heat_counts_pages_and_recency(mos: MemoryOS) -> None:
    cube = setup(mos, working_capacity=1, similarity_threshold=0.0, beta=2.0, gamma=0.5)
    add(mos, cube, [*HIKING, "stays"])
    run(mos, cube)
    (segment,) = mos.store.list_items(cube, SEGMENTS)
    assert segment.heat == pytest.approx(2.0 * 3 + 0.5, abs=0.01)  # just changed: exp(0) = 1


def test_past_capacity_the_coldest_segment_is_archived_not_deleted(mos: MemoryOS) -> None:
    cube = setup(mos, working_capacity=1, similarity_threshold=2.0, mid_capacity=2)
    add(mos, cube, [*COOKING, HIKING[0], "stays"])
    run(mos, cube)
    assert mos.store.count_items(cube, SEGMENTS) == 2
    archived = mos.store.list_items(cube, Filters(types=("segment",), statuses=("archived",)))
    assert len(archived) == 1
    assert [s.item_id for s in archived[0].sources] != []  # kept with its pages
