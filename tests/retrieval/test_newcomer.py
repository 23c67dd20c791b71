"""The newcomer's searches of issue 26 on a small cube (``tests/retrieval/newcomer.py``)."""

from __future__ import annotations

import pytest

from memstrata import MemoryOS
from memstrata.filters import Filters
from memstrata.model import Hit
from memstrata.retrieval.question import as_speakers
from tests.retrieval.newcomer import LISBON, build

pytestmark = pytest.mark.engines("sqlite", "postgres")


def _states_lisbon(hit: Hit, lisbon: str) -> bool:
    """The Lisbon turn itself, or an item the tiers made of it (a fact, a profile attribute)."""
    return hit.item.id == lisbon or any(s.item_id == lisbon for s in hit.item.sources)


def test_the_dense_query_speaks_as_its_subjects() -> None:
    alice = frozenset({"Alice"})
    assert as_speakers("where does alice live", alice) == "where do I live"
    assert as_speakers("What does Alice's dog eat?", alice) == "What does my dog eat?"
    assert as_speakers("Is Alice single?", alice) == "Am I single?"
    both = frozenset({"Alice", "Mary Ann"})
    assert as_speakers("Did mary ann meet ALICE?", both) == "Did I meet you?"
    assert as_speakers("Where did Alices go?", alice) == "Where did Alices go?"
    # Nothing but the name: kept whole (the dense channel would have nothing to look for).
    assert as_speakers("Who is Alice?", alice) == "Who is Alice?"


@pytest.mark.parametrize("query", ["where does alice live", "where do I live"])
def test_where_alice_lives_comes_first(mos: MemoryOS, query: str) -> None:
    """Alice's turn saying where she moved comes first (or what the tiers made of it), and
    before every other turn: "I adopted a beagle named Biscuit in March." came above it, and
    the Lisbon turn was not among the first eight, because the dense channel asked "where does
    they live", far from "Alice: I moved to Lisbon in 2023"."""
    build(mos)
    lisbon = next(i.id for i in mos.store.list_items("notes", Filters()) if i.text == LISBON)
    hits = mos.search(query, user_id="alice", top_k=10)
    assert _states_lisbon(hits[0], lisbon), [h.item.text for h in hits]
    turns = [h.item.id for h in hits if h.item.type == "turn"]
    assert turns[0] == lisbon, [h.item.text for h in hits]


def test_a_question_in_the_first_person_is_about_the_user(mos: MemoryOS) -> None:
    """ "where do I live" names no one, but asks about the user: the assistant's replies ("Hello
    Alice, ...", "A beagle! How is Biscuit settling in?") are someone else's, and weigh as
    another speaker's (they came 3rd and 4th, between the user's own turns)."""
    build(mos)
    hits = mos.search("where do I live", user_id="alice", top_k=10)
    turns = [h for h in hits if h.item.type == "turn"][:3]
    assert [h.item.role for h in turns] == ["user"] * 3, [h.item.text for h in hits]
    assistant = [h for h in hits if h.item.role == "assistant"]
    assert assistant and all(
        p.reason == "other speaker (the question says I)"
        for h in assistant for p in h.parts if p.name == "speaker"
    )  # fmt: skip
    said = mos.search("what did you tell me about Lisbon", user_id="alice", top_k=10)
    assert not any(p.name == "speaker" for h in said for p in h.parts)
