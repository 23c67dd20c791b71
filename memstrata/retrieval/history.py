"""The time machine: memory as it stood at a past moment (DESIGN §5, ``as_of``).

Every write keeps a full snapshot in ``item_versions`` with its time, so the state of a cube at
time T is, per item, its latest version written at or before T; items first written after T
are absent.  ``search_as_of`` ranks those snapshots with the same two channels as the live
search (BM25 over the query's terms and cosine similarity), fused by RRF.  It reads the whole
cube's history rather than an index, so it costs time linear in the cube's size (about a
second per 100k items): it is an audit tool, not the hot path.  A snapshot whose text is what
the item says now reuses the stored vector; an older text is embedded again.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from memstrata.config import Settings
from memstrata.embed import Embedder
from memstrata.filters import Filters
from memstrata.model import Hit, MemoryItem
from memstrata.retrieval.search import candidate_width, fuse_channels
from memstrata.store.base import Store
from memstrata.text import embedding_text, query_terms, terms

# BM25's usual constants.
_K1, _B = 1.2, 0.75


def search_as_of(
    store: Store,
    embedder: Embedder,
    settings: Settings,
    query: str,
    cube_ids: Sequence[str],
    filters: Filters,
    top_k: int,
    at: datetime,
) -> list[Hit]:
    """The ``top_k`` best items for ``query`` among ``cube_ids`` as they stood at ``at``."""
    items = [
        item for cube_id in cube_ids for item in store.items_as_of(cube_id, at)
        if filters.matches(item)
    ]  # fmt: skip
    if not items:
        return []
    width = candidate_width(settings, top_k)
    keyword = _bm25(query, items)[:width]
    dense = _dense(store, embedder, query, items)[:width]
    fused = fuse_channels(keyword, dense, settings)[:top_k]
    by_id = {item.id: item for item in items}
    return [Hit(by_id[i], score, ranks) for i, score, ranks in fused]


def _bm25(query: str, items: list[MemoryItem]) -> list[tuple[str, float]]:
    wanted = query_terms(query)
    docs = [Counter(terms(embedding_text(i))) for i in items]
    if not wanted or not docs:
        return []
    average = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    df = {t: sum(1 for d in docs if t in d) for t in wanted}
    scored = []
    for item, doc in zip(items, docs, strict=True):
        length = sum(doc.values())
        score = 0.0
        for t in wanted:
            if doc[t]:
                idf = math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5))
                score += (
                    idf * doc[t] * (_K1 + 1) / (doc[t] + _K1 * (1 - _B + _B * length / average))
                )
        if score > 0:
            scored.append((item.id, score))
    return sorted(scored, key=lambda s: -s[1])


def _dense(
    store: Store, embedder: Embedder, query: str, items: list[MemoryItem]
) -> list[tuple[str, float]]:
    current = {i.id: i for i in store.get_items([i.id for i in items])}
    same = [i for i in items if i.id in current and current[i.id].text == i.text]
    older = [i for i in items if not (i.id in current and current[i.id].text == i.text)]
    parts, order = [], []
    if same:
        parts.append(store.get_vectors([i.id for i in same]))
        order.extend(same)
    if older:
        parts.append(embedder.embed_passages([embedding_text(i) for i in older]))
        order.extend(older)
    scores = np.vstack(parts) @ np.asarray(embedder.embed_query(query), np.float32).ravel()
    ranked = sorted(zip(order, scores.tolist(), strict=True), key=lambda p: -p[1])
    return [(item.id, float(score)) for item, score in ranked]
