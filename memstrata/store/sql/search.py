"""The keyword channel's shell for both engines: which of a query's terms are searched.

Cost grows with the postings a query touches, so only the query's rarest terms are kept, up to
``max_postings`` (default: the store's ``keyword_max_postings``) matches in the searched cubes,
always at least one term: the common terms dropped carry the least BM25 weight, and the dense
channel still sees the whole query.  Counting a term's postings and ranking by BM25 are the
engine's (FTS5, or ``tsvector`` with BM25 in SQL): ``_postings_of`` and ``_bm25``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstrata.filters import Filters
from memstrata.store.base import Scored
from memstrata.store.sql.database import SQLDatabase
from memstrata.text import cube_prefix, query_terms


@dataclass(frozen=True)
class Keywords:
    """What the engine's BM25 ranks: the kept terms, the searched cubes' prefixes and ids, the
    filters and how many hits."""

    terms: list[str]
    prefixes: list[str]
    cube_ids: Sequence[str]
    filters: Filters
    limit: int


class SQLSearch(SQLDatabase):
    """``SearchIndex.keyword_search``: the rarest terms within the postings budget, then BM25."""

    #: the postings budget when a search names none (``keyword_max_postings``)
    _max_postings: int

    def keyword_search(
        self,
        query: str,
        cube_ids: Sequence[str],
        filters: Filters,
        limit: int,
        *,
        max_postings: int | None = None,
    ) -> list[Scored]:
        """BM25 over the item text of ``cube_ids`` (their prefixed terms, see ``text``) of the
        query's rarest terms (see the module doc)."""
        prefixes = [cube_prefix(c) for c in dict.fromkeys(cube_ids)]
        kept = self.keyword_terms(query, cube_ids, max_postings=max_postings)
        if not kept:
            return []
        return self._bm25(Keywords(kept, prefixes, cube_ids, filters, limit))

    def keyword_terms(
        self, query: str, cube_ids: Sequence[str], *, max_postings: int | None = None
    ) -> list[str]:
        """The terms of ``query`` that ``keyword_search`` ranks by: its rarest ones in the
        cubes, rarest first, within ``max_postings`` postings (always one, when any occurs);
        empty when none occurs.  ``bench/core.py`` matches them alone to measure the floor."""
        prefixes = [cube_prefix(c) for c in dict.fromkeys(cube_ids)]
        budget = self._max_postings if max_postings is None else max_postings
        counted = [(n, t) for t in query_terms(query) if (n := self._postings_of(prefixes, t))]
        kept: list[str] = []
        total = 0
        for count, term in sorted(counted):
            if kept and total + count > budget:
                break
            kept.append(term)
            total += count
        return kept

    def _postings_of(self, prefixes: list[str], term: str) -> int:
        """How many items of the cubes of these prefixes hold ``term`` (remembered a while:
        see ``PostingsCache``; remembering saves a query per term on every search)."""
        raise NotImplementedError

    def _bm25(self, asked: Keywords) -> list[Scored]:
        """The best ``asked.limit`` items of ``asked.cube_ids`` passing ``asked.filters`` that
        hold any of ``asked.terms`` (each prefixed by the cubes' prefixes), by BM25 (higher is
        better)."""
        raise NotImplementedError
