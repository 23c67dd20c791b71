"""``SearchIndex``: the keyword (BM25 over ``tsvector``) and dense (pgvector cosine) channels.

Keyword: the query's rarest terms (within the postings budget, as in SQLite) are matched with
the GIN index; each match is scored in SQL with FTS5's BM25 (k1 = 1.2, b = 0.75, idf
``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6) from the term counts the ``tsvector`` keeps,
so both engines rank alike (their stemmers differ a little: Snowball English here, Porter there).

Dense: cosine distance ordered in SQL over the items of the searched cubes; above a few thousand
items the planner walks the width's HNSW index with pgvector's iterative scan (filters applied as
it goes, results in exact distance order), below it scans exactly.  Scores are cosine
similarities (1 − distance).

``next_turns`` (what a ranking reads back that PostgreSQL reads its own way, with a window) is
here too.  ``PostgresStore`` serves the live database and a scratch copy of a past state
(``scratch_index``), so both are ranked by one engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.filters import Filters
from memstrata.store.base import Scored, Vectors
from memstrata.store.postgres.connection import DIALECT, PostgresDatabase
from memstrata.store.postgres.writes import TS_CONFIG, vector_param
from memstrata.store.sql.clauses import LIVE, filter_sql
from memstrata.store.sql.search import Keywords, SQLSearch

_K1, _B = 1.2, 0.75
# Parameters in order: terms, idfs, the tsquery, the cubes, the filters', the mean length, limit.
_BM25 = f"""
WITH q AS (
    SELECT t.idf, (SELECT lexeme FROM unnest(to_tsvector('{TS_CONFIG}', t.term)) LIMIT 1) AS lexeme
    FROM unnest(%s::text[], %s::float8[]) AS t (term, idf)
), m AS (
    SELECT i.id, i.tsv, i.doclen FROM items i
    WHERE i.tsv @@ to_tsquery('{TS_CONFIG}', %s) AND i.cube_id = ANY(%s) AND {{where}}
)
SELECT m.id, sum(q.idf * u.tf * {_K1 + 1}
    / (u.tf + {_K1} * ({1 - _B} + {_B} * m.doclen / %s))) AS score
FROM m
CROSS JOIN LATERAL (SELECT lexeme, array_length(positions, 1) AS tf FROM unnest(m.tsv)) AS u
JOIN q ON q.lexeme = u.lexeme
GROUP BY m.id ORDER BY score DESC, m.id LIMIT %s
"""


class PostgresSearch(PostgresDatabase, SQLSearch):
    """``SearchIndex`` over the items (``get_items`` is the shared ``SQLItems``')."""

    def _bm25(self, asked: Keywords) -> list[Scored]:
        count, avgdl = self.collection_stats()
        prefixed, idfs = [], []
        for term in asked.terms:  # each cube's prefixed term that is there, with its idf
            for p in asked.prefixes:
                if postings := self._prefixed_postings(p + term):
                    prefixed.append(p + term)
                    idfs.append(_idf(count, postings))
        where, params = filter_sql(DIALECT, asked.filters)
        found = self.rows(_BM25.format(where=where), [
            prefixed, idfs, " | ".join(prefixed), list(asked.cube_ids), *params, avgdl or 1.0,
            asked.limit,
        ])  # fmt: skip
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
            f"AND status IN ({LIVE}) LIMIT 1) FROM unnest(%s::text[]) AS c, "
            "unnest(%s::text[]) AS n"
        )
        cubes, wanted = list(dict.fromkeys(cube_ids)), list(dict.fromkeys(names))
        if not cubes or not wanted:
            return set()
        return {r[0] for r in self.rows(sql, (cubes, wanted)) if r[0] is not None}

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        if not item_ids:
            return {}
        sql = (
            "SELECT id, next_id FROM (SELECT i.id, LEAD(i.id) OVER (PARTITION BY i.session_id "
            "ORDER BY i.event_time, i.id) AS next_id FROM items i WHERE i.cube_id = %s "
            f"AND i.type = 'turn' AND i.status IN ({LIVE}) AND i.session_id IN "
            "(SELECT session_id FROM items WHERE cube_id = %s AND id = ANY(%s))) AS w "
            "WHERE id = ANY(%s) AND next_id IS NOT NULL"
        )
        wanted = list(item_ids)
        return {r[0]: r[1] for r in self.rows(sql, (cube_id, cube_id, wanted, wanted))}

    def _postings_of(self, prefixes: list[str], term: str) -> int:
        return sum(self._prefixed_postings(p + term) for p in prefixes)

    def _prefixed_postings(self, prefixed: str) -> int:
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
        where, params = filter_sql(DIALECT, filters)
        # One expression, ordered by and returned: the distance is computed once per row, and it
        # is the HNSW index's own expression, so the planner can walk the index.
        distance = f"(i.vector::vector({dim})) <=> %s::real[]::vector({dim})"
        sql = (
            f"SELECT i.id, {distance} AS distance FROM items i "
            f"WHERE i.dim = {dim} AND i.cube_id = ANY(%s) AND {where} "
            "ORDER BY distance LIMIT %s"
        )
        found = self.rows(sql, [vector_param(vector), list(cube_ids), *params, limit])
        return [(r[0], 1.0 - float(r[1])) for r in found]


def _idf(count: float, postings: int) -> float:
    """FTS5's BM25 idf: ``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6 (also when the
    remembered N is below n: it was counted before other writes)."""
    ratio = (count - postings + 0.5) / (postings + 0.5)
    return float(np.log(ratio)) if ratio > 1.0 else 1e-6
