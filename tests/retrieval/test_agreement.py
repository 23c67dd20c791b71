"""Boosts that cannot overturn agreement (issue 26, ``retrieval.agreement``)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memstrata import MemoryOS
from memstrata.model import Hit, MemoryItem, Part
from memstrata.retrieval.agreement import enforce
from memstrata.retrieval.explain import adjusted, scaled, total
from tests.retrieval.newcomer import LEVADA_NOTE, build

K = 20


def _hit(name: str, ranks: dict[str, int], *adjust: tuple[str, float]) -> Hit:
    """A fused hit for ``name`` ranked ``ranks``, then each (step, added score) of ``adjust``."""
    parts = tuple(Part("channel", c, 1.0 / (K + r), rank=r) for c, r in ranks.items())
    hit = Hit(MemoryItem(id=name, cube_id="c", text=name), sum(p.value for p in parts), ranks,
              parts)  # fmt: skip
    for step, value in adjust:
        hit = adjusted(hit, step, hit.score + value, step)
    return hit


def _order(hits: list[Hit]) -> list[str]:
    ranked = enforce(sorted(hits, key=lambda h: -h.score), {h.item.id: n for n, h in
                                                           enumerate(hits, 1)})  # fmt: skip
    for hit in ranked:
        assert abs(total(hit) - hit.score) <= 1e-12
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)
    return [h.item.id for h in ranked]


def test_a_boost_does_not_lift_an_item_past_one_both_channels_rank_far_higher() -> None:
    top = _hit("top", {"keyword": 1, "dense": 1})
    boosted = _hit("boosted", {"keyword": 5, "dense": 5}, ("neighbour", 0.05))
    other = _hit("other", {"keyword": 2, "dense": 3})
    assert _order([top, boosted, other]) == ["top", "boosted", "other"]
    [moved] = [h for h in enforce(sorted([top, boosted, other], key=lambda h: -h.score),
                                  {"top": 1}) if h.item.id == "boosted"]  # fmt: skip
    assert moved.parts[-1].name == "agreement"
    assert moved.parts[-1].reason == "both channels rank #1 higher"
    assert moved.parts[-1].value < 0


def test_close_calls_may_be_reordered() -> None:
    # 4 is not past max(4 × 1, 1 + 3): a close call, the boost stands
    top = _hit("top", {"keyword": 1, "dense": 1})
    boosted = _hit("boosted", {"keyword": 4, "dense": 4}, ("neighbour", 0.05))
    assert _order([top, boosted]) == ["boosted", "top"]
    # far apart in one channel only: the channels do not agree
    split = _hit("split", {"keyword": 2, "dense": 30}, ("neighbour", 0.05))
    assert _order([top, split]) == ["split", "top"]


def test_an_item_a_channel_did_not_rank_is_not_judged() -> None:
    """A turn that joined as a neighbour, or that one channel only found, is not ranked lower
    by both: the channels do not agree about it (on LoCoMo, judging such items as ranked
    last cost recall: the next turn of a question is often its answer)."""
    top = _hit("top", {"keyword": 3, "dense": 2})
    joined = _hit("joined", {}, ("neighbour", 0.2))
    dense_only = _hit("dense-only", {"dense": 9}, ("neighbour", 0.2))
    assert _order([top, joined, dense_only]) == ["dense-only", "joined", "top"]


def test_an_item_placed_below_keeps_what_it_dominates_below_it() -> None:
    a = _hit("a", {"keyword": 1, "dense": 1})
    b = _hit("b", {"keyword": 5, "dense": 5}, ("neighbour", 0.3))
    c = _hit("c", {"keyword": 25, "dense": 25}, ("neighbour", 0.4))
    assert _order([a, b, c]) == ["a", "b", "c"]


def test_truth_over_time_is_not_held_back() -> None:
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    stale = _hit("stale", {"keyword": 1, "dense": 1})
    stale = Hit(MemoryItem(id="stale", cube_id="c", text="old", valid_to=when), stale.score,
                stale.ranks, stale.parts)  # fmt: skip
    stale = scaled(stale, "time", 0.4, "no longer holds (present question)")
    other = _hit("other", {"keyword": 6, "dense": 6})
    successor = _hit("new", {}, ("successor", 0.09))
    assert _order([stale, other, successor]) == ["new", "other", "stale"]


def test_a_dated_channel_that_fused_it_higher_is_not_an_adjustment() -> None:
    top = _hit("top", {"keyword": 1, "dense": 1})
    dated = _hit("dated", {"keyword": 9, "dense": 9, "dated": 1})
    assert dated.score > top.score
    assert _order([top, dated]) == ["dated", "top"]
    # the dated channel ranked it and not the other: a question about a day, the boost stands
    day = _hit("day", {"dated": 1}, ("date", 0.1))
    assert _order([top, day]) == ["day", "top"]


@pytest.mark.engines("sqlite", "postgres")
def test_levada_hike_madeira_puts_the_note_both_channels_rank_first_first(
    mos: MemoryOS,
) -> None:
    """The newcomer's search: the note ranked #1 in both channels comes first, above the turn
    ranked #5 in both that its neighbour lifted (second before)."""
    build(mos)
    hits = mos.search("Levada hike Madeira", user_id="alice", top_k=5)
    assert hits[0].item.text == LEVADA_NOTE
    assert (hits[0].ranks["keyword"], hits[0].ranks["dense"]) == (1, 1)
    moved = [h for h in hits if any(p.name == "agreement" for p in h.parts)]
    assert moved and all(
        p.reason == "both channels rank #1 higher" for h in moved for p in h.parts
        if p.name == "agreement"
    )  # fmt: skip


def test_many_hits_are_compared_in_blocks_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More hits than one block of rows (a search of a large ``top_k``): the same order as
    comparing them all at once, the boosted far-down items each placed below their dominator."""
    from memstrata.retrieval import agreement

    hits = [_hit(f"h{n}", {"keyword": n, "dense": n}) for n in range(1, 700)]
    hits += [_hit(f"lift{n}", {"keyword": 600 + n, "dense": 600 + n}, ("neighbour", 0.2))
             for n in range(1, 20)]  # fmt: skip
    blocks = _order(hits)
    monkeypatch.setattr(agreement, "ROWS", 100_000)
    assert len(hits) < agreement.ROWS
    assert blocks == _order(hits)
    assert blocks.index("lift1") > blocks.index("h1")
