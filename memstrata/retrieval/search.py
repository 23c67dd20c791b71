"""Hybrid retrieval: BM25 and dense cosine over the caller's cubes, fused by RRF (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memstrata.config import Settings
from memstrata.embed.base import Embedder
from memstrata.model import Hit, MemoryItem
from memstrata.retrieval.filters import Filters
from memstrata.retrieval.fusion import reciprocal_rank_fusion
from memstrata.store.base import Store


def embedding_text(item: MemoryItem) -> str:
    """What is embedded for an item: its text, prefixed by the speaker when there is one.

    The speaker matters to questions such as "What did Caroline paint?", so it is part of the
    vector; it is not part of ``text``, which stays exactly what the caller said.
    """
    return f"{item.speaker}: {item.text}" if item.speaker else item.text


def hybrid_search(
    store: Store,
    embedder: Embedder,
    settings: Settings,
    query: str,
    cube_ids: Sequence[str],
    filters: Filters,
    top_k: int,
) -> list[Hit]:
    """The ``top_k`` best items for ``query`` in ``cube_ids`` passing ``filters``, best first.

    Each channel contributes its best ``max(search_candidates, 2 * top_k)`` candidates; ``Hit.score``
    is the fused RRF score and ``Hit.ranks`` each channel's rank.
    """
    width = max(settings.search_candidates, 2 * top_k)
    channels = {
        "keyword": store.keyword_search(query, cube_ids, filters, width),
        "dense": store.vector_search(embedder.embed_query(query), cube_ids, filters, width),
    }
    weights = {"keyword": settings.keyword_weight, "dense": settings.dense_weight}
    fused = reciprocal_rank_fusion(channels, weights, settings.rrf_k)[:top_k]
    items = {item.id: item for item in store.get_items([item_id for item_id, _, _ in fused])}
    return [Hit(items[i], score, ranks) for i, score, ranks in fused if i in items]


#: Derived types whose hits are shown as the turns they came from (a segment keeps its summary).
EXPANDED_TYPES = ("fact", "profile", "preference", "knowledge")


def expand_to_sources(store: Store, hits: list[Hit]) -> list[Hit]:
    """Hits with each long-tier item replaced, in place, by the source turns it came from.

    A fact is a retrieval key: the words a question uses, in the third person; what answers it
    verbatim is the turn.  Each source keeps the item's score and ranks; duplicates (a turn
    found directly and through a fact) appear once, at their best rank.
    """
    wanted = [s.item_id for h in hits if h.item.type in EXPANDED_TYPES for s in h.item.sources]
    sources = {i.id: i for i in store.get_items([i for i in wanted if i])}

    def expanded(hit: Hit) -> list[Hit]:
        if hit.item.type not in EXPANDED_TYPES:
            return [hit]
        found = [sources[s.item_id] for s in hit.item.sources if s.item_id in sources]
        return [Hit(item, hit.score, hit.ranks) for item in found] or [hit]

    return _first_of_each(h for hit in hits for h in expanded(hit))


def expand_chain(store: Store, hits: list[Hit]) -> list[Hit]:
    """Hits with each turn followed by the next turn of its session (MemoryOS's dialogue chain).

    A turn that asks is often answered by the next one: on LoCoMo's development split this
    (with RRF k = 20) lifts evidence recall within 1000 tokens from 0.668 to 0.729
    (docs/evaluation.md).  The neighbour takes its turn's score and ranks; a turn already
    present is not repeated.
    """
    turns: dict[str, list[str]] = {}
    for hit in hits:
        if hit.item.type == "turn" and hit.item.session_id is not None:
            turns.setdefault(hit.item.cube_id, []).append(hit.item.id)
    following = {
        k: v for cube, ids in turns.items() for k, v in store.next_turns(cube, ids).items()
    }
    neighbours = {i.id: i for i in store.get_items(list(set(following.values())))}

    def chained(hit: Hit) -> list[Hit]:
        after = neighbours.get(following.get(hit.item.id, ""))
        return [hit] + ([Hit(after, hit.score, hit.ranks)] if after else [])

    return _first_of_each(h for hit in hits for h in chained(hit))


def _first_of_each(hits: Iterable[Hit]) -> list[Hit]:
    """``hits`` in order, each item once (at its first, best-ranked, place)."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.item.id not in seen:
            seen.add(hit.item.id)
            out.append(hit)
    return out
