"""Pseudo-relevance feedback: a second dense pass from the first pass's best items (Rocchio).

A question that asks for a list ("What activities does Melanie partake in?") shares little
with each answer ("I just signed up for a pottery class"), but the first pass usually finds
one or two of them.  Their vectors say what the answers look like: moving the query vector
toward their centroid, ``q' = q + FEEDBACK_BETA · c / |c|`` (both unit vectors, so the two
weigh alike), and searching again reaches the other turns of that kind, whatever session they
are in.  The second ranking is a channel of its own (``feedback``), fused with the others by
RRF (``search.fuse_channels``), so it adds candidates without reordering the first pass's.

Measured with ``bench/locomo_replay.py`` on LoCoMo's development split (tiers on, 760
questions; docs/evaluation.md, issue 26): with 3 items and weight 0.5 (the defaults), all
evidence within 1000 / 2000 tokens 0.820 / 0.867 → 0.822 / 0.871, multi-hop 0.401 / 0.521 →
0.430 / 0.563, at one more dense scan per query.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.embed.base import Vectors
from memstrata.errors import ItemNotFound
from memstrata.filters import Filters
from memstrata.retrieval.fusion import Fused
from memstrata.store.base import Scored, SearchIndex

#: Weight of the feedback centroid against the query (both unit vectors).
FEEDBACK_BETA = 1.0


def feedback_vector(vector: Vectors, centroid: Vectors, beta: float = FEEDBACK_BETA) -> Vectors:
    """The unit vector ``vector + beta · centroid / |centroid|`` (``vector`` itself for a zero
    centroid)."""
    norm = float(np.linalg.norm(centroid))
    if norm == 0.0:
        return vector
    moved = vector + beta * centroid / norm
    return np.asarray(moved / np.linalg.norm(moved), dtype=np.float32)


def feedback_channel(
    store: SearchIndex,
    vector: Vectors,
    cube_ids: Sequence[str],
    filters: Filters,
    first: Sequence[Fused],
    *,
    docs: int,
    width: int,
) -> list[Scored]:
    """The ``width`` items passing ``filters`` nearest the query moved toward the centroid of
    the first ``docs`` items of ``first`` (the fused first pass), best first; empty when
    ``docs`` is 0, ``first`` is empty, or one of those items has no stored vector (an item
    without one is never a dense match, so its direction is unknown)."""
    top = [item_id for item_id, _, _ in first[:docs]]
    if docs <= 0 or not top:
        return []
    try:
        vectors = store.get_vectors(top, cube_ids)
    except ItemNotFound:
        return []
    moved = feedback_vector(vector, vectors.mean(axis=0))
    return store.vector_search(moved, cube_ids, filters, width)
