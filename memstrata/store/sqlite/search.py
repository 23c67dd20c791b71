"""``SearchIndex``: the keyword (FTS5 BM25) and dense (exact cosine) channels, and what a
ranking reads back of the items that only SQLite reads its way (``next_turns``).

``SQLiteStore`` serves the live database and the scratch copies ``HistoryStore.scratch_index``
makes of a past state, so both are ranked by one engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from memstrata.filters import Filters
from memstrata.store.base import Scored, Vectors
from memstrata.store.sql.clauses import LIVE, filter_sql
from memstrata.store.sql.search import Keywords, SQLSearch
from memstrata.store.sqlite.connection import DIALECT, SQLiteDatabase
from memstrata.text import any_of

#: Rows added to a cube (by one process) between looks at whether its index is due, and rows
#: past the index's watermark that make an extension worth a background task.
INDEX_STEP = 2000
#: The keyword channel's rank function: BM25 over the body column only (the cube column is
#: weighted 0).
BM25 = "bm25(1.0, 0.0)"


class SQLiteSearch(SQLiteDatabase, SQLSearch):
    """``SearchIndex`` over the items (``get_items`` is the shared ``SQLItems``')."""

    def _bm25(self, asked: Keywords) -> list[Scored]:
        terms, cube_ids, limit = asked.terms, asked.cube_ids, asked.limit
        expression = f"body : {any_of([p + t for p in asked.prefixes for t in terms])}"
        where, params = filter_sql(DIALECT, asked.filters)
        # FTS5 ranks every match by BM25 itself (``ORDER BY rank``, the rank function given in
        # the query), and the join reads the items in that order, stopping at the ``limit``-th
        # that passes the filters: no second sort, and no row past those read.  Asking the
        # index for a few times ``limit`` rows and joining them first read all matches again
        # whenever filters rejected most of them (a name's superseded profile facts: at 100k
        # turns most questions naming a person, 15 -> 5.6 ms CPU).  FTS5's bm25 is negated
        # (lower is better): turned round here.
        sql = (
            "SELECT i.id, f.rank FROM items_fts f CROSS JOIN items i ON i.rid = f.rowid "
            f"WHERE items_fts MATCH ? AND f.rank MATCH '{BM25}' "
            f"AND i.cube_id IN ({DIALECT.marks(len(cube_ids))}) AND {where} "
            "ORDER BY f.rank LIMIT ?"
        )
        found = self.rows(sql, [expression, *cube_ids, *params, limit])
        return [(r[0], -float(r[1])) for r in found]

    def named_speakers(self, cube_ids: Sequence[str], names: Sequence[str]) -> set[str]:
        # One index seek per (cube, name) on items_cube_speaker, stopping at the first live
        # item: a DISTINCT over a speaker's items would read all of them.
        sql = (
            "SELECT speaker FROM items WHERE cube_id = ? AND speaker = ? COLLATE NOCASE "
            f"AND status IN ({LIVE}) LIMIT 1"
        )
        found = set()
        with self.connection() as conn:
            for cube_id in dict.fromkeys(cube_ids):
                for name in dict.fromkeys(names):
                    row = conn.execute(sql, (cube_id, name)).fetchone()
                    if row is not None:
                        found.add(row[0])
        return found

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        if not item_ids:
            return {}
        among, param = DIALECT.among("h.id", item_ids)
        # One seek per turn on items_cube_session_time: the first live turn of its session
        # after it, in (event_time, id) order.
        sql = (
            "SELECT h.id, (SELECT n.id FROM items n WHERE n.cube_id = h.cube_id "
            "AND n.session_id = h.session_id AND n.event_time >= h.event_time "
            "AND (n.event_time > h.event_time OR n.id > h.id) "
            f"AND n.type = 'turn' AND n.status IN ({LIVE}) ORDER BY n.event_time, n.id LIMIT 1) "
            f"FROM items h WHERE {among} AND +h.cube_id = ? AND h.type = 'turn' "
            f"AND h.status IN ({LIVE})"
        )
        return {r[0]: r[1] for r in self.rows(sql, [param, cube_id]) if r[1] is not None}

    def _postings_of(self, prefixes: list[str], term: str) -> int:
        key = (tuple(prefixes), term)
        count = self._postings.get(key)
        if count is None:
            sql = "SELECT count(*) FROM items_fts WHERE items_fts MATCH ?"
            expression = f"body : {any_of([p + term for p in prefixes])}"
            count = int(self.rows(sql, (expression,))[0][0])
            self._postings.put(key, count)
        return count

    def vector_search(
        self, vector: Vectors, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        """Best-first exact cosine over each cube's in-memory mirror, refreshed first."""
        found: list[Scored] = []
        for cube_id in cube_ids:
            cube = self._vectors.refreshed(cube_id, self._changed_rows)
            allowed = self._metadata_matches(cube_id, filters) if filters.metadata else None
            with self._vectors.single_threaded():
                found.extend(cube.search(vector, filters, limit, allowed))
        found.sort(key=lambda hit: -hit[1])
        return found[:limit]

    def vector_index_due(self, cube_id: str) -> bool:
        """Whether the cube's approximate index should be built or extended now.

        Cheap on the add path: it looks at the database only after ``INDEX_STEP`` rows were
        added to the cube by this process since it last looked, and then counts at most
        ``INDEX_STEP`` rows past the saved index's watermark (or the minimum size, without one).
        """
        minimum = self._vectors.index_min_items
        if minimum <= 0 or self._added_since[cube_id] < min(INDEX_STEP, minimum):
            return False
        self._added_since[cube_id] = 0
        watermark = self._vectors.watermark(cube_id)
        need = minimum if watermark is None else INDEX_STEP
        (count,) = self.rows(
            "SELECT count(*) FROM (SELECT 1 FROM items WHERE cube_id = ? AND seq > ? LIMIT ?)",
            (cube_id, watermark or 0, need),
        )[0]
        return bool(count >= need)

    def build_vector_index(self, cube_id: str) -> int:
        """Build or extend the cube's approximate dense index (``VectorCache.build_index``)."""
        return self._vectors.build_index(cube_id, self._changed_rows)

    def _changed_rows(self, cube_id: str, since_seq: int) -> Iterator[tuple[Any, ...]]:
        """The mirror's rows (``vectors.Row``) of items changed after ``since_seq``, by seq."""
        with self.connection() as conn:
            cursor = conn.execute(
                "SELECT i.id, i.rid, i.seq, i.status, i.tier, i.type, i.session_id, i.event_time, "
                "v.vector FROM items i LEFT JOIN vectors v ON v.rid = i.rid "
                "WHERE i.cube_id = ? AND i.seq > ? ORDER BY i.seq",
                (cube_id, since_seq),
            )
            while batch := cursor.fetchmany(4096):
                yield from (tuple(r) for r in batch)

    def _metadata_matches(self, cube_id: str, filters: Filters) -> list[str]:
        """Ids of the cube's items passing the metadata filters (checked in SQL, not the mirror)."""
        only = Filters(statuses=filters.statuses, metadata=filters.metadata)
        where, params = filter_sql(DIALECT, only)
        sql = f"SELECT i.id FROM items i WHERE i.cube_id = ? AND {where}"
        return [r[0] for r in self.rows(sql, [cube_id, *params])]
