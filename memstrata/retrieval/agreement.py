"""Boosts that cannot overturn agreement (docs/search.md, "Agreement").

The adjustments after fusion (a neighbour's share, the speaker and date factors, time and
chatter) may reorder close calls, but not lift an item above one that **both** channels,
keyword and dense, rank higher by a wide margin: when two independent rankings agree that B is
far better than A, a boost of A (or a penalty of B) is not evidence enough to overturn them.

B *dominates* A when both are in both channels, B ranked higher than A in each by a wide
margin (A ranked worse than ``max(MARGIN_FACTOR × r, r + MARGIN_GAP)`` where ``r`` is B's rank),
and B fused higher than A (the channels' parts alone).  An item a channel did not rank is not
judged: the channels do not agree about it, and such items are mostly turns that joined as the
next turn of a candidate, often its answer (on LoCoMo's development split, judging them as
ranked last cost recall; docs/search.md).  When the query names
a time, the dated channel (the dense ranking within that time) has a say too: an item it
ranked is dominated only by one it ranked higher by a wide margin, since a question about a
day is answered by that day's items even when other days share more of its words.  ``enforce`` places an
item that ends above one that dominates it just below the lowest such item, with an
``agreement`` part that says which.

Two adjustments are not held back, because they are about truth, not relevance: an item that no
longer holds (a ``time`` factor below 1, for a question about the present) does not keep its
place by agreement, and a turn lifted as what replaced it (a ``successor`` part) keeps the
place it took.

Domination is transitive, so the lowest dominator of an item is never itself moved, and one
pass suffices: each item's anchor is the lowest-placed item dominating it, and an item placed
after its anchor keeps its order among the others placed there by fused score (which respects
domination).  The comparisons are one vectorised n × m test (n hits, m of them in both
channels), in blocks of ``ROWS`` rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from memstrata.model import Hit
from memstrata.retrieval.explain import adjusted

#: The two channels whose agreement protects an item.
AGREEING = ("keyword", "dense")
#: B ranks higher than A by a wide margin in a channel when A's rank there is worse than
#: ``max(MARGIN_FACTOR × B's rank, B's rank + MARGIN_GAP)``.
MARGIN_FACTOR = 4
MARGIN_GAP = 3
#: Hits compared against the judges at once (bounds the comparison's memory to ROWS × judges).
ROWS = 256


def enforce(hits: Sequence[Hit], places: Mapping[str, int] | None = None) -> list[Hit]:
    """``hits`` (best first, after every adjustment) with no item above one that dominates it
    (see the module docs): such an item is moved just below its lowest dominator, scored
    between that item and the next one not moved, with an ``agreement`` adjustment whose
    reason names the dominator by its place in ``places`` (the fused list; its id when it
    has none there)."""
    n = len(hits)
    judges = [j for j, hit in enumerate(hits) if _judges(hit)]
    if n < 2 or not judges:
        return list(hits)
    keyword, dense, dated, fused = _columns(hits)
    j = np.array(judges)
    both = np.isfinite(keyword) & np.isfinite(dense)
    anchor = np.full(n, -1)
    # Rows in blocks: a search of top_k 1000 has thousands of candidates, and one n × m test
    # would hold tens of megabytes per comparison; a block holds ROWS × m.
    for start in range(0, n, ROWS):
        rows = slice(start, min(start + ROWS, n))
        # an item is judged only by those below it: one above it already is
        dominated = (
            (keyword[rows, None] > _bound(keyword[j]))
            & (dense[rows, None] > _bound(dense[j]))
            & both[rows, None]
            & (np.isinf(dated[rows])[:, None] | (dated[rows, None] > _bound(dated[j])))
            & (fused[rows, None] < fused[j])
            & (np.arange(rows.start, rows.stop)[:, None] < j)
        )
        anchor[rows] = np.where(dominated, j, -1).max(axis=1)
    anchor[[i for i, hit in enumerate(hits) if _stays(hit)]] = -1
    if (anchor < 0).all():
        return list(hits)
    return _placed(hits, anchor.tolist(), fused.tolist(), places or {})


def _judges(hit: Hit) -> bool:
    """Whether ``hit`` may hold its place against others: both channels ranked it, and it
    still holds (no ``time`` factor below 1)."""
    if not all(channel in hit.ranks for channel in AGREEING):
        return False
    return not any(p.name == "time" and (p.factor or 1.0) < 1.0 for p in hit.parts)


def _stays(hit: Hit) -> bool:
    """Whether ``hit`` keeps its place whatever agreement says: it was lifted as what
    replaced a statement that stopped holding."""
    return any(p.name == "successor" for p in hit.parts)


def _columns(hits: Sequence[Hit]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each hit's keyword, dense and dated rank (infinite when absent) and fused score (the
    sum of its channel parts: 0 when it has none recorded)."""
    inf = float("inf")
    keyword = np.array([h.ranks.get("keyword", inf) for h in hits], dtype=float)
    dense = np.array([h.ranks.get("dense", inf) for h in hits], dtype=float)
    dated = np.array([h.ranks.get("dated", inf) for h in hits], dtype=float)
    fused = np.array(
        [sum(p.value for p in h.parts if p.kind == "channel") for h in hits], dtype=float
    )
    return keyword, dense, dated, fused


def _bound(ranks: np.ndarray) -> np.ndarray:
    """Per rank ``r``, the rank beyond which another item is ranked lower by a wide margin."""
    bound: np.ndarray = np.maximum(MARGIN_FACTOR * ranks, ranks + MARGIN_GAP)
    return bound[None, :]


def _placed(
    hits: Sequence[Hit], anchor: list[int], fused: list[float], places: Mapping[str, int]
) -> list[Hit]:
    """``hits`` reordered: each item with an anchor (``anchor[i] > i``) just after it, those
    after one anchor in fused order; moved items rescored between the anchor and the next
    item that stays."""
    order = sorted(
        range(len(hits)),
        key=lambda i: (anchor[i], 1, -fused[i]) if anchor[i] > i else (i, 0, 0.0),
    )
    out: list[Hit] = []
    run: list[int] = []
    for i in [*order, -1]:
        if i >= 0 and anchor[i] > i:
            run.append(i)
            continue
        if run:
            out += _rescored(hits, run, out[-1], hits[i].score if i >= 0 else 0.0, places)
            run = []
        if i >= 0:
            out.append(hits[i])
    return out


def _rescored(
    hits: Sequence[Hit], run: list[int], above: Hit, below: float, places: Mapping[str, int]
) -> list[Hit]:
    """The hits ``run`` (placed after ``above``, in this order) scored evenly between
    ``above``'s score and ``below``."""
    place = places.get(above.item.id)
    name = f"#{place}" if place is not None else above.item.id
    reason = f"both channels rank {name} higher"
    step = (above.score - below) / (len(run) + 1)
    return [
        adjusted(hits[i], "agreement", above.score - step * (n + 1), reason)
        for n, i in enumerate(run)
    ]
