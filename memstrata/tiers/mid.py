"""The mid tier (MemoryOS's mid-term memory): pages grouped into topic segments.

A turn leaving the working tier becomes a *page*: it keeps its id, moves to tier ``mid`` (one
event) and joins the segment it fits best, when

    cos(page, segment centroid) + λ · Jaccard(page keywords, segment keywords) ≥ similarity_threshold

(λ is the cube setting ``keyword_weight``), or else starts a new segment.  A segment is an item
of type ``segment``: its text is an extractive summary of its pages, its vector the normalised
mean of its pages' vectors (updated as each page joins, so never stale), its ``sources`` the pages
in order of joining, ``metadata["small_talk"]`` whether every page is small talk (greetings,
questions, pleasantries: ``retrieval.timeline.small_talk``; such a segment is written, and
search weighs it less), and its ``heat`` ``α·visits + β·pages + γ·exp(-Δt/τ)``.  Past
``mid_capacity`` active segments, the coldest is archived (never deleted).  Dialogue chains need
no links: a page's neighbours are the turns before and after it in its session.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from memstrata.embed.base import Vectors, normalise
from memstrata.errors import ItemNotFound
from memstrata.filters import Filters
from memstrata.model import MemoryItem, Source, new_id, utcnow
from memstrata.reader.offline import keywords, merge_keywords, summarise
from memstrata.retrieval.timeline import small_talk
from memstrata.store.base import CubeItems, TierStore
from memstrata.tiers.settings import TierSettings

SEGMENTS = Filters(tiers=("mid",), types=("segment",))
#: Keywords a segment keeps.
SEGMENT_KEYWORDS = 12
#: Nearest segments (by centroid) among which the join rule picks.
CANDIDATES = 8


def heat(segment: MemoryItem, settings: TierSettings, now: datetime) -> float:
    """``α·visits + β·pages + γ·exp(-Δt/τ)``, Δt since the segment was last visited or changed."""
    last = segment.last_accessed_at or segment.updated_at
    hours = max(0.0, (now - last).total_seconds() / 3600)
    return (
        settings.alpha * segment.access_count
        + settings.beta * len(segment.sources)
        + settings.gamma * math.exp(-hours / settings.tau_hours)
    )


def jaccard(a: list[str], b: list[str]) -> float:
    union = set(a) | set(b)
    return len(set(a) & set(b)) / len(union) if union else 0.0


class MidTier:
    """Places pages into segments of one store; not thread-safe per cube (one task at a time)."""

    def __init__(self, store: TierStore, embedder: str) -> None:
        self.store = store
        self.embedder = embedder

    def place(self, pages: list[MemoryItem], settings: TierSettings) -> list[MemoryItem]:
        """Move ``pages`` (working-tier turns of one cube, oldest first) into segments.

        Returns the segments touched, as stored.  Idempotent for a page already in the mid tier
        (it is skipped), so a retried task does not place a page twice.
        """
        touched: dict[str, MemoryItem] = {}
        pages = [p for p in pages if p.tier == "working"]
        if not pages:
            return []
        vectors = self.store.get_vectors([p.id for p in pages], [pages[0].cube_id])
        for page, vector in zip(pages, vectors, strict=True):
            words = keywords(page.text)
            segment = self._best_segment(page.cube_id, vector, words, settings)
            if segment is None:
                segment = self._new_segment(page, vector, words, settings)
            else:
                segment = self._join(segment, page, vector, words, settings)
            touched[segment.id] = segment
            moved = replace(page, tier="mid", keywords=words, segment_id=segment.id)
            self.store.update_item(
                moved, None, op="move", actor=None, reason="working tier overflow"
            )
        self._archive_coldest(pages[0].cube_id, settings)
        return list(touched.values())

    def _best_segment(
        self, cube_id: str, vector: Vectors, words: list[str], settings: TierSettings
    ) -> MemoryItem | None:
        """The segment whose join score is highest and reaches the threshold, if any."""
        near = self.store.vector_search(vector, [cube_id], SEGMENTS, CANDIDATES)
        segments = {s.id: s for s in self.store.get_items([i for i, _ in near], [cube_id])}
        best, best_score = None, settings.similarity_threshold
        for segment_id, cosine in near:
            segment = segments.get(segment_id)
            if segment is None:
                continue
            score = cosine + settings.keyword_weight * jaccard(words, segment.keywords)
            if score >= best_score:
                best, best_score = segment, score
        return best

    def _new_segment(
        self, page: MemoryItem, vector: Vectors, words: list[str], settings: TierSettings
    ) -> MemoryItem:
        now = utcnow()
        segment = MemoryItem(
            id=new_id(),
            cube_id=page.cube_id,
            text=summarise([page]),
            tier="mid",
            type="segment",
            session_id=page.session_id,
            keywords=words,
            metadata={
                "keyword_counts": dict.fromkeys(words, 1),
                "vector_norm": 1.0,
                "small_talk": small_talk(page.text),
            },
            event_time=page.event_time,
            created_at=now,
            updated_at=now,
            sources=[Source(item_id=page.id, role="page")],
        )
        segment = replace(segment, heat=heat(segment, settings, now))
        self.store.add_items([segment], vector[None, :], self.embedder)
        return segment

    def _join(
        self,
        segment: MemoryItem,
        page: MemoryItem,
        vector: Vectors,
        words: list[str],
        settings: TierSettings,
    ) -> MemoryItem:
        # The stored vector is the unit centroid; with the norm of the pages' vector sum kept
        # beside it, adding a page is exact: sum' = centroid · norm + page.
        stored = self.store.get_vectors([segment.id], [segment.cube_id])[0]
        total = stored * segment.metadata.get("vector_norm", 1.0)
        total = total + vector
        merged = normalise(total[None, :])[0]
        counts: dict[str, Any] = dict(segment.metadata.get("keyword_counts", {}))
        sources = [*segment.sources, Source(item_id=page.id, role="page")]
        grown = replace(
            segment,
            text=self._summary(sources, page),
            keywords=merge_keywords(counts, words, SEGMENT_KEYWORDS),
            metadata={
                **segment.metadata,
                "keyword_counts": counts,
                "vector_norm": float(np.linalg.norm(total)),
                # search weighs a segment of nothing but small talk less (retrieval.timeline)
                "small_talk": segment.metadata.get("small_talk") is True and small_talk(page.text),
            },
            sources=sources,
        )
        grown = replace(grown, heat=heat(grown, settings, utcnow()))
        return self.store.update_item(
            grown, np.asarray(merged, np.float32), op="update", actor=None,
            reason="page joined", snapshot=False,
        )  # fmt: skip

    def _summary(self, sources: list[Source], page: MemoryItem) -> str:
        """Summary over the segment's first and last pages (``page`` is not stored in mid yet)."""
        ids = [s.item_id for s in sources if s.item_id]
        ends = ids[:2] + ids[-2:] if len(ids) > 4 else ids
        others = [i for i in ends if i != page.id]
        pages = {i.id: i for i in self.store.get_items(others, [page.cube_id])}
        pages[page.id] = page
        return summarise([pages[i] for i in ends if i in pages])

    def _archive_coldest(self, cube_id: str, settings: TierSettings) -> None:
        """Archive the coldest active segments beyond ``mid_capacity``."""
        excess = self.store.count_items(cube_id, SEGMENTS) - settings.mid_capacity
        if excess <= 0:
            return
        for segment in self.store.list_items(cube_id, SEGMENTS, order="heat", limit=excess):
            archived = replace(segment, status="archived")
            self.store.update_item(
                archived, None, op="transition", actor=None, reason="mid tier over capacity"
            )


def record_visits(
    store: CubeItems, cube_id: str, counts: Mapping[str, int], now: datetime
) -> list[MemoryItem]:
    """Count reads of items of ``cube_id``, and a visit to each segment read directly or
    through its pages (a page's segment is of its cube).

    Returns the active segments visited, with their heat refreshed (MemoryOS: visits heat a
    topic up, so a topic read often is promoted sooner).
    """
    visits: Counter[str] = Counter()
    for item in store.get_items(list(counts), [cube_id]):
        segment_id = item.id if item.type == "segment" else item.segment_id
        if segment_id:
            visits[segment_id] += counts[item.id]
    read = {**counts, **{s: n for s, n in visits.items() if s not in counts}}
    store.record_access(cube_id, read, now)
    refreshed = []
    for segment in store.get_items(list(visits), [cube_id]):
        cube = store.get_cube(segment.cube_id)
        if segment.status not in ("generated", "activated") or cube is None:
            continue
        hot = replace(segment, heat=heat(segment, TierSettings.parse(cube.settings), now))
        try:
            refreshed.append(
                store.update_item(hot, None, op="visit", actor=None, reason="read", snapshot=False)
            )
        except ItemNotFound:
            # Erased, or its cube deleted, since it was read: nothing to heat.  Failing here
            # would retry the task and count the other items' reads twice.
            continue
    return refreshed
