"""``SearchIndex``: the keyword (BM25 over ``tsvector``) and dense (pgvector cosine) channels.

Keyword: the query's rarest terms (within the postings budget, as in SQLite) are matched with
the GIN index; each match is scored in SQL with FTS5's BM25 (k1 = 1.2, b = 0.75, idf
``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6) from the term counts the ``tsvector`` keeps,
so both engines rank alike (their stemmers differ a little: Snowball English here, Porter there).

Dense: cosine distance ordered in SQL over the items of the searched cubes; above a few thousand
items the planner walks the width's HNSW index with pgvector's iterative scan (filters applied as
it goes, results in exact distance order), below it scans exactly.  Scores are cosine
similarities (1 − distance).

The same class serves the live database and a scratch copy of a past state
(``PostgresHistory.scratch_index``), so both are ranked by one engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.filters import Filters
from memstrata.store.base import Scored, Vectors
from memstrata.store.postgres.clauses import filter_sql
from memstrata.store.postgres.items import LIVE, PostgresItems
from memstrata.store.postgres.writes import TS_CONFIG, vector_param
from memstrata.text import cube_prefix, query_terms

_K1, _B = 1.2, 0.75
_BM25 = f"""
WITH q AS (
    SELECT t.idf, (SELECT lexeme FROM unnest(to_tsvector('{TS_CONFIG}', t.term)) LIMIT 1) AS lexeme
    FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) AS t (term, idf)
), m AS (
    SELECT i.id, i.tsv, i.doclen FROM items i
    WHERE i.tsv @@ to_tsquery('{TS_CONFIG}', %(query)s) AND i.cube_id = ANY(%(cubes)s) AND {{where}}
)
SELECT m.id, sum(q.idf * u.tf * {_K1 + 1}
    / (u.tf + {_K1} * ({1 - _B} + {_B} * m.doclen / %(avgdl)s))) AS score
FROM m
CROSS JOIN LATERAL (SELECT lexeme, array_length(positions, 1) AS tf FROM unnest(m.tsv)) AS u
JOIN q ON q.lexeme = u.lexeme
GROUP BY m.id ORDER BY score DESC, m.id LIMIT %(limit)s
"""


class PostgresSearch(PostgresItems):
    """``SearchIndex`` over the items (``get_items`` and ``next_turns`` are ``PostgresItems``')."""

    def keyword_search(
        self,
        query: str,
        cube_ids: Sequence[str],
        filters: Filters,
        limit: int,
        *,
        max_postings: int | None = None,
    ) -> list[Scored]:
        """BM25 over the item text of ``cube_ids`` (their prefixed terms, see ``text``); only
        the query's rarest terms are kept, up to ``max_postings`` matches (default: the
        store's ``keyword_max_postings``), always at least one."""
        prefixes = [cube_prefix(c) for c in dict.fromkeys(cube_ids)]
        budget = self._max_postings if max_postings is None else max_postings
        kept = self._rarest_terms(prefixes, query_terms(query), budget)
        if not kept:
            return []
        count, avgdl = self.collection_stats()
        terms, idfs = [], []
        for prefixed, postings in kept:
            terms.append(prefixed)
            idfs.append(_idf(count, postings))
        where, params = filter_sql(filters)
        found = self.rows(_BM25.format(where=where), {
            "terms": terms, "idfs": idfs, "query": " | ".join(terms), "cubes": list(cube_ids),
            "avgdl": avgdl or 1.0, "limit": limit, **params,
        })  # fmt: skip
        return [(r[0], float(r[1])) for r in found]

    def vector_index_due(self, cube_id: str) -> bool:
        # The HNSW index is PostgreSQL's own, kept by the server as rows are written.
        return False

    def build_vector_index(self, cube_id: str) -> int:
        return 0

    def named_speakers(self, cube_ids: Sequence[str], names: Sequence[str]) -> set[str]:
        # One index seek per (cube, name) on items_cube_speaker, stopping at the first live item.
        sql = (
            "SELECT (SELECT speaker FROM items WHERE cube_id = c AND lower(speaker) = lower(n) "
            "AND status = ANY(%s) LIMIT 1) FROM unnest(%s::text[]) AS c, unnest(%s::text[]) AS n"
        )
        cubes, wanted = list(dict.fromkeys(cube_ids)), list(dict.fromkeys(names))
        if not cubes or not wanted:
            return set()
        return {r[0] for r in self.rows(sql, (LIVE, cubes, wanted)) if r[0] is not None}

    def _rarest_terms(
        self, prefixes: list[str], terms: list[str], budget: int
    ) -> list[tuple[str, int]]:
        """The prefixed terms of ``terms`` found in these cubes with their posting counts,
        rarest query term first, within the postings budget."""
        counted = []
        for term in terms:
            per_cube = [(p + term, self._postings_of(p + term)) for p in prefixes]
            total = sum(n for _, n in per_cube)
            if total:
                counted.append((total, term, [pc for pc in per_cube if pc[1]]))
        counted.sort(key=lambda c: (c[0], c[1]))
        kept: list[tuple[str, int]] = []
        spent = 0
        for total, _, per_cube in counted:
            if kept and spent + total > budget:
                break
            kept.extend(per_cube)
            spent += total
        return kept

    def _postings_of(self, prefixed: str) -> int:
        """How many items hold ``prefixed`` (remembered a while: see ``PostingsCache``)."""
        key = ((), prefixed)
        count = self._postings.get(key)
        if count is None:
            found = self.row(
                f"SELECT count(*) FROM items WHERE tsv @@ to_tsquery('{TS_CONFIG}', %s)",
                (prefixed,),
            )
            count = int(found[0]) if found else 0
            self._postings.put(key, count)
        return count

    def vector_search(
        self, vector: Vectors, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        """Best-first cosine over the items of ``cube_ids`` with a vector of the query's width."""
        if limit <= 0 or not cube_ids:
            return []
        dim = int(np.asarray(vector).shape[0])
        where, params = filter_sql(filters)
        # One expression, ordered by and returned: the distance is computed once per row, and it
        # is the HNSW index's own expression, so the planner can walk the index.
        distance = f"(i.vector::vector({dim})) <=> %(query)s::real[]::vector({dim})"
        sql = (
            f"SELECT i.id, {distance} AS distance FROM items i "
            f"WHERE i.dim = {dim} AND i.cube_id = ANY(%(cubes)s) AND {where} "
            "ORDER BY distance LIMIT %(limit)s"
        )
        found = self.rows(sql, {"query": vector_param(vector), "cubes": list(cube_ids),
                                "limit": limit, **params})  # fmt: skip
        return [(r[0], 1.0 - float(r[1])) for r in found]


def _idf(count: float, postings: int) -> float:
    """FTS5's BM25 idf: ``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6 (also when the
    remembered N is below n: it was counted before other writes)."""
    ratio = (count - postings + 0.5) / (postings + 0.5)
    return float(np.log(ratio)) if ratio > 1.0 else 1e-6
