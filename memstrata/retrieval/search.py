"""Hybrid retrieval: BM25 and dense cosine over the caller's cubes, fused by RRF (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Sequence

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
