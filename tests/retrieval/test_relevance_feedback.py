"""Pseudo-relevance feedback (``retrieval.feedback``): the second dense pass and its channel,
with the real store and embedder (e5), on both engines."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
import pytest

from memstrata import MemoryOS
from memstrata.filters import Filters
from memstrata.retrieval.feedback import feedback_channel, feedback_vector
from memstrata.retrieval.search import hybrid_search

pytestmark = pytest.mark.engines("sqlite", "postgres")

TURNS = [
    "I just signed up for a pottery class, it is so calming.",
    "My car broke down on the highway again.",
    "We went camping in the mountains with the kids last weekend.",
    "The tax forms are due next Friday.",
    "Took the kids swimming at the lake this morning.",
    "Our landlord raised the rent.",
]
QUERY = "What activities does Melanie do with her kids?"


def _cube(mos: MemoryOS) -> str:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u").cube_id
    for day, text in enumerate(TURNS, start=1):
        message = {"name": "Melanie", "content": text, "timestamp": f"2024-05-{day:02d}T10:00:00Z"}
        mos.add([message], user_id="u", cube_id=cube, session_id=f"s{day}")
    return cube


def test_the_feedback_vector_is_the_unit_sum_of_query_and_centroid_direction() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    c = np.array([0.0, 2.0, 0.0], dtype=np.float32)
    moved = feedback_vector(q, c)
    assert np.allclose(moved, np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0))
    assert moved.dtype == np.float32
    assert feedback_vector(q, np.zeros(3, dtype=np.float32)) is q  # no direction: the query


def test_every_hit_found_again_carries_a_feedback_rank_and_part(mos: MemoryOS) -> None:
    cube = _cube(mos)
    settings = replace(mos.settings, feedback_docs=2, feedback_weight=0.5)
    hits = hybrid_search(mos.store, mos.embedder, settings, QUERY, [cube], Filters(), 6)
    again = [h for h in hits if "feedback" in h.ranks]
    assert again, "the second pass ranks what the first pass found near its best items"
    for hit in again:
        (part,) = [p for p in hit.parts if p.kind == "channel" and p.name == "feedback"]
        assert part.rank == hit.ranks["feedback"]
        assert part.value == pytest.approx(0.5 / (settings.rrf_k + part.rank))
    off = replace(mos.settings, feedback_docs=0)
    plain = hybrid_search(mos.store, mos.embedder, off, QUERY, [cube], Filters(), 6)
    assert not any("feedback" in h.ranks for h in plain)


def test_the_channel_follows_the_first_pass_and_the_filters(mos: MemoryOS) -> None:
    cube = _cube(mos)
    vector = mos.embedder.embed_query(QUERY)
    first = [(i, 1.0, {}) for i, _ in mos.store.vector_search(vector, [cube], Filters(), 2)]
    found = feedback_channel(mos.store, vector, [cube], Filters(), first, docs=2, width=4)
    assert 0 < len(found) <= 4
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True)
    assert feedback_channel(mos.store, vector, [cube], Filters(), first, docs=0, width=4) == []
    assert feedback_channel(mos.store, vector, [cube], Filters(), [], docs=2, width=4) == []
    late = Filters(since=datetime(2024, 5, 5, tzinfo=timezone.utc))
    narrowed = feedback_channel(mos.store, vector, [cube], late, first, docs=2, width=4)
    texts = {i.text for i in mos.store.get_items([i for i, _ in narrowed], [cube])}
    assert texts and all(TURNS.index(t) >= 4 for t in texts if t in TURNS)


def test_a_search_of_the_past_runs_the_feedback_pass_too(mos: MemoryOS) -> None:
    cube = _cube(mos)
    now = datetime.now(timezone.utc)
    hits = mos.search(QUERY, user_id="u", cube_ids=[cube], top_k=6, as_of=now)
    assert hits and any("feedback" in h.ranks for h in hits)
