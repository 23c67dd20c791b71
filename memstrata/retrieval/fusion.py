"""Reciprocal rank fusion: combine best-first channel lists into one ranking.

``score(d) = Σ_c  w_c / (k + rank_c(d))`` with ranks starting at 1 (Cormack et al., 2009).  It
needs no score calibration between BM25 and cosine, which is why it is the default fuser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memstrata.model import Part

Fused = tuple[str, float, dict[str, int]]


def reciprocal_rank_fusion(
    channels: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float],
    k: int = 60,
) -> list[Fused]:
    """(id, fused score, {channel: rank}) best first; ties keep first-seen order."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, hits in channels.items():
        weight = weights.get(name, 1.0)
        for rank, (item_id, _score) in enumerate(hits, start=1):
            scores[item_id] = scores.get(item_id, 0.0) + weight / (k + rank)
            ranks.setdefault(item_id, {})[name] = rank
    order = sorted(scores, key=lambda i: -scores[i])
    return [(i, scores[i], ranks[i]) for i in order]


def channel_parts(
    ranks: Mapping[str, int], weights: Mapping[str, float], k: int = 60
) -> tuple[Part, ...]:
    """One ``channel`` part per channel of ``ranks`` ({channel: rank}, in the order the
    channels were fused), each its contribution ``w_c / (k + rank_c)``: in that order they sum
    to exactly the score ``reciprocal_rank_fusion`` gave."""
    return tuple(
        Part("channel", name, weights.get(name, 1.0) / (k + rank), rank=rank)
        for name, rank in ranks.items()
    )
