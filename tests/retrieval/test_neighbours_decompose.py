"""Neighbour smoothing, query decomposition and in-memory filters (retrieval.search/decompose)."""

from __future__ import annotations

from datetime import datetime, timezone

from memstrata import MemoryOS
from memstrata.filters import Filters, parse_filters
from memstrata.model import Hit, MemoryItem, new_id
from memstrata.retrieval.decompose import decompose, interleave
from memstrata.retrieval.search import hybrid_search, smooth_neighbours


def test_decompose_splits_a_coordination_of_names() -> None:
    assert decompose("What do Jon and Gina both have in common?") == [
        "What do Jon have in common?",
        "What do Gina have in common?",
    ]
    assert decompose("What did Ann, Bo and Cy eat?") == [
        "What did Ann eat?",
        "What did Bo eat?",
        "What did Cy eat?",
    ]
    assert decompose("Who is Tim and John's coach?") == [
        "Who is Tim's coach?",
        "Who is John's coach?",
    ]


def test_decompose_leaves_other_queries_whole() -> None:
    for query in (
        "What did Caroline research?",
        "What pottery have Melanie and her kids made?",  # one name and a phrase
        "Did Ann and Ann meet?",
    ):
        assert decompose(query) == [query]


def _hit(text: str, score: float) -> Hit:
    return Hit(MemoryItem(id=new_id(), cube_id="c", text=text), score)


def test_interleave_is_round_robin_without_repeats() -> None:
    a1, a2, b1 = _hit("a1", 0.9), _hit("a2", 0.8), _hit("b1", 0.1)
    merged = interleave([[a1, a2], [b1, a1]], limit=10)
    assert [h.item.text for h in merged] == ["a1", "b1", "a2"]
    assert len(interleave([[a1, a2], [b1]], limit=2)) == 2


def test_filters_match_in_memory_as_the_store_does() -> None:
    when = datetime(2024, 5, 1, tzinfo=timezone.utc)
    item = MemoryItem(id="x", cube_id="c", text="t", session_id="s1", event_time=when,
                      metadata={"topic": "pets"})  # fmt: skip
    assert Filters().matches(item)
    assert parse_filters({"session_id": "s1", "tier": "working", "type": "turn"}).matches(item)
    assert parse_filters({"metadata": {"topic": "pets", "gone": None}}).matches(item)
    assert not parse_filters({"metadata": {"topic": "work"}}).matches(item)
    assert not parse_filters({"since": "2024-05-02T00:00:00Z"}).matches(item)
    assert not parse_filters({"until": "2024-04-30T00:00:00Z"}).matches(item)
    assert not parse_filters({"tier": "long"}).matches(item)
    assert not parse_filters({"status": "archived"}).matches(item)


def _dialogue(mos: MemoryOS) -> list[str]:
    mos.create_user("ann")
    mos.create_cube("c", owner="ann", cube_id="c", settings={"working_capacity": 100})
    return mos.add(
        [
            {"role": "user", "name": "Bo", "content": "What did you do at the weekend?"},
            {"role": "user", "name": "Ann", "content": "Mostly pottery, I made two bowls."},
            {"role": "user", "name": "Bo", "content": "Nice. The weather was awful here."},
            {"role": "user", "name": "Ann", "content": "It rained here as well."},
        ],
        user_id="ann",
        cube_id="c",
        session_id="s1",
    )


def test_a_turn_gains_from_its_neighbours_score(mos: MemoryOS) -> None:
    ids = _dialogue(mos)
    items = {i.id: i for i in mos.store.get_items(ids, ["c"])}
    # Only the question was found: its answer (the next turn) joins, scored 0.5 × 1.0.
    smoothed = smooth_neighbours(mos.store, [Hit(items[ids[0]], 1.0)], Filters(), 0.5)
    assert [(h.item.id, h.score, h.ranks) for h in smoothed] == [
        (ids[0], 1.0, {}),
        (ids[1], 0.5, {}),
    ]
    # Two candidates: each gains from the other, the one before also from the one after.
    both = smooth_neighbours(
        mos.store, [Hit(items[ids[1]], 0.2), Hit(items[ids[2]], 0.4)], Filters(), 0.5
    )
    scores = {h.item.id: h.score for h in both}
    assert scores[ids[1]] == 0.2 + 0.5 * 0.4 and scores[ids[2]] == 0.4 + 0.5 * 0.2
    assert scores[ids[3]] == 0.5 * 0.4  # the next turn of a candidate


def test_a_neighbour_outside_the_filters_does_not_join(mos: MemoryOS) -> None:
    ids = _dialogue(mos)
    (first,) = mos.store.get_items(ids[:1], ["c"])
    later = parse_filters({"metadata": {"topic": "pets"}})
    assert [h.item.id for h in smooth_neighbours(mos.store, [Hit(first, 1.0)], later, 0.5)] == [
        ids[0]
    ]


def test_search_finds_the_answer_to_a_matching_question(mos: MemoryOS) -> None:
    ids = _dialogue(mos)
    query = "what did someone do at the weekend"  # naming Ann would rank her first
    args = (mos.store, mos.embedder, mos.settings, query, ["c"], Filters(), 4)
    plain = {h.item.id: h.score for h in hybrid_search(*args, neighbour_weight=0.0)}
    smoothed = hybrid_search(*args)
    # the question first (a turn that asks is not weighed as chatter, retrieval.timeline),
    # its answer next, lifted by it
    assert [h.item.id for h in smoothed[:2]] == [ids[0], ids[1]]
    assert smoothed[1].score >= plain[ids[1]] + 0.6 * plain[ids[0]]
