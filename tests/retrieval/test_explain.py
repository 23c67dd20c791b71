"""Every hit explains itself (issue 26): ``Hit.parts`` sum to the score, one ``channel`` part
per channel that ranked the item, then each adjustment with its reason."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memstrata import MemoryOS, Settings
from memstrata.model import Hit, MemoryItem, Part
from memstrata.retrieval import timeline
from memstrata.retrieval.explain import total
from memstrata.retrieval.search import (
    OTHER_SPEAKER,
    channel_weights,
    expand_chain,
    expand_to_sources,
)
from tests.retrieval.newcomer import build

pytestmark = pytest.mark.engines("sqlite", "postgres")

QUERIES = (
    "where does alice live",
    "where do I live",
    "Levada hike Madeira",
    "What did Alice say on 10 February 2024?",  # a named day: the dated channel, the date boost
    "Did Alice and Biscuit go to Madeira?",  # decomposed: one sub-query per name
    "Good morning",  # small talk
)


def _check(hit: Hit, rrf_k: int = 20) -> None:
    """The invariant: the parts sum to the score; the channel parts are the ranks' RRF shares."""
    assert hit.parts, hit
    assert abs(total(hit) - hit.score) <= 1e-9 * max(abs(hit.score), 1e-12), hit.parts
    channels = {p.name: p for p in hit.parts if p.kind == "channel"}
    assert {n: p.rank for n, p in channels.items()} == hit.ranks
    for part in channels.values():
        assert part.rank is not None
        weight = channel_weights(Settings())[part.name]  # the feedback channel weighs 0.5
        assert part.value == pytest.approx(weight / (rrf_k + part.rank))
    for part in hit.parts:
        if part.kind == "adjustment" and part.value != 0.0:
            assert part.reason, part


def test_every_hit_of_a_search_carries_parts_summing_to_its_score(mos: MemoryOS) -> None:
    build(mos)
    for query in QUERIES:
        hits = mos.search(query, user_id="alice", top_k=20)
        assert hits, query
        for hit in hits:
            _check(hit)


def test_adjustments_say_what_they_did(mos: MemoryOS) -> None:
    build(mos)
    parts = [p for h in mos.search("where does alice live", user_id="alice", top_k=30)
             for p in h.parts]  # fmt: skip
    speaker = [p for p in parts if p.name == "speaker"]
    assert speaker and all(p.factor == OTHER_SPEAKER and p.reason == "other speaker"
                           for p in speaker)  # fmt: skip
    neighbour = [p.reason for p in parts if p.name == "neighbour"]
    assert neighbour and all(r.startswith(("next turn of #", "turn before #")) for r in neighbour)
    dated = mos.search("What did Alice say on 10 February 2024?", user_id="alice", top_k=30)
    assert any(p.name == "date" and p.factor == 2.0 and p.reason == "named day"
               for h in dated for p in h.parts)  # fmt: skip
    assert any(p.name == "dated" and p.kind == "channel" for h in dated for p in h.parts)
    chatter = mos.search("Good morning", user_id="alice", top_k=30)
    assert any(p.name == "chatter" and p.reason == "small talk" for h in chatter for p in h.parts)
    asked = mos.search("Did Alice and Biscuit go to Madeira?", user_id="alice", top_k=10)
    notes = {p.reason for h in asked for p in h.parts if p.name == "decomposition"}
    assert notes == {"asked as 'Did Alice go to Madeira?'", "asked as 'Did Biscuit go to Madeira?'"}


def test_the_past_and_the_context_keep_the_parts(mos: MemoryOS) -> None:
    build(mos)
    now = datetime.now(timezone.utc) - timedelta(milliseconds=1)
    for hit in mos.search("Levada hike Madeira", user_id="alice", as_of=now):
        _check(hit)
    context = mos.context("where does alice live", user_id="alice", budget_tokens=400)
    assert context.hits
    for hit in context.hits:
        _check(hit)
    found = mos.search("beagle Biscuit", user_id="alice", top_k=30)
    derived = next(h for h in found if h.item.type in ("fact", "profile") and h.item.sources)
    turn = next(h for h in found if h.item.type == "turn" and h.item.role == "user")
    [*sources] = expand_to_sources(mos.store, [derived])
    [_, after] = expand_chain(mos.store, [turn])
    for hit in [*sources, after]:
        _check(hit)
        assert hit.parts[: len(hit.parts) - 1] in (derived.parts, turn.parts)
    assert sources[0].parts[-1].reason == f"source of {derived.item.type} {derived.item.id}"
    assert after.parts[-1].reason == f"next turn of {turn.item.id}"


def _stale() -> Hit:
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    item = MemoryItem(id="old", cube_id="c", text="I live in Porto.", valid_to=when)
    return Hit(item, 1 / 21, {"dense": 1}, (Part("channel", "dense", 1 / 21, rank=1),))


def test_time_weights_are_parts() -> None:
    """A statement that stopped holding, asked about in the present, is weighed down with a
    ``time`` part; asked about in the past, up (no store read: it names no successor)."""
    for asked, factor in (("present", timeline.PAST_IN_PRESENT), ("past", timeline.PAST_IN_PAST)):
        [hit] = timeline.weigh(None, [_stale()], asked)  # type: ignore[arg-type]
        assert hit.score == pytest.approx(factor / 21)
        [part] = [p for p in hit.parts if p.name == "time"]
        assert part.factor == factor
        assert part.reason == f"no longer holds ({asked} question)"
        _check(hit)
