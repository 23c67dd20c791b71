"""The default backend: one SQLite file (WAL), FTS5 full text, numpy vector search.

``SQLiteStore`` is SQLite's database (``connection.py``: one writer, per-thread readers, the
dialect), its search (``search.py``: FTS5 BM25, the per-cube vector mirror of ``vectors.py``)
and the calls both engines share (``store/sql/``'s ``SQLStore``).  What is SQLite's own is here:
the hooks that lay out an item's full text and vector in tables of their own (``writes.py``),
the vector calls, the scratch index of a past state (a private in-memory database), ``compact``
(``VACUUM``) and where artifact files go (beside the database file).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import numpy as np

from memstrata.errors import ItemNotFound, MemCubeError
from memstrata.model import MemoryItem
from memstrata.store.base import Vectors
from memstrata.store.sql import writes as shared
from memstrata.store.sql.database import Layout
from memstrata.store.sql.store import SQLStore
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import DIALECT, memory_uri
from memstrata.store.sqlite.search import SQLiteSearch

__all__ = ["SQLiteStore"]


class SQLiteStore(SQLiteSearch, SQLStore):
    """``Store`` over one SQLite file.  Thread-safe; safe to share a file between processes.

    ``SQLiteStore(path, busy_timeout_ms=…, synchronous=…, keyword_max_postings=…)``; see
    ``SQLiteDatabase`` for the connections and ``SQLiteSearch`` for the postings budget.
    """

    layout: ClassVar[Layout] = writes
    HAS_VECTOR = "EXISTS (SELECT 1 FROM vectors v WHERE v.rid = i.rid)"

    # -- the engine's rows (``SQLDatabase`` hooks) --------------------------------------------

    def _added(self, cube_id: str, count: int) -> None:
        self._added_since[cube_id] += count

    def artifact_dir(self, cube_id: str) -> Path:
        """Where the files of ``cube_id``'s artifacts go (``<db file>.artifacts/<cube_id>/``);
        ``MemCubeError`` for a database that lives in memory."""
        if self._in_memory:
            raise MemCubeError("artifacts need a database file, not ':memory:'")
        db = Path(self.path)
        return db.parent / f"{db.name}.artifacts" / cube_id

    def _artifact_base(self) -> Path:
        """The directory relative artifact paths are relative to: the database file's."""
        return Path.cwd() if self._in_memory else Path(self.path).parent

    # -- vectors -----------------------------------------------------------------------------

    def get_vectors(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> Vectors:
        among, param = DIALECT.among("i.id", item_ids)
        cubes, cube_param = DIALECT.among("i.cube_id", list(dict.fromkeys(cube_ids)))
        sql = (
            "SELECT i.id, v.vector FROM items i JOIN vectors v ON v.rid = i.rid "
            f"WHERE {cubes} AND {among}"
        )
        found: dict[str, bytes] = {r[0]: r[1] for r in self.rows(sql, (cube_param, param))}
        missing = [i for i in item_ids if i not in found]
        if missing:
            raise ItemNotFound(missing[0])
        if not item_ids:
            return np.zeros((0, 0), np.float32)
        return np.stack([np.frombuffer(found[i], dtype=np.float32) for i in item_ids])

    def replace_vectors(
        self, cube_id: str, item_ids: Sequence[str], vectors: Vectors, embedder: str
    ) -> None:
        with self.transaction() as conn:
            last = writes.next_seq(conn, len(item_ids))
            for offset, (item_id, vector) in enumerate(zip(item_ids, vectors, strict=True)):
                rid = conn.execute(
                    "SELECT rid FROM items WHERE id = ? AND cube_id = ?", (item_id, cube_id)
                ).fetchone()
                if rid is None:
                    raise ItemNotFound(item_id, cube_id)
                conn.execute(
                    "UPDATE vectors SET vector = ?, embedder = ? WHERE rid = ?",
                    (np.asarray(vector, np.float32).tobytes(), embedder, rid[0]),
                )
                seq = last - len(item_ids) + 1 + offset
                conn.execute("UPDATE items SET seq = ? WHERE rid = ?", (seq, rid[0]))
            conn.execute("UPDATE cubes SET embedder = ? WHERE cube_id = ?", (embedder, cube_id))
            shared.event(DIALECT, conn, None, cube_id, None, "reembed",
                         after={"embedder": embedder})  # fmt: skip
        self._vectors.forget(cube_id, drop_index=True)

    # -- the past ----------------------------------------------------------------------------

    @contextmanager
    def scratch_index(self, items: Sequence[MemoryItem], vectors: Vectors) -> Iterator[SQLiteStore]:
        """A ``SearchIndex`` over exactly ``items`` (row i of ``vectors`` is item i's vector; a
        row of zeros: the item has no vector), gone when the context exits.

        A private in-memory database laid out exactly as this one (same schema, tokenizer and
        row writers) and searched by the same code, so a search of the past ranks as the live
        search would have; nothing of it reaches a disk.  Keyword term choice uses this store's
        ``keyword_max_postings``.
        """
        scratch = SQLiteStore(
            memory_uri(), keyword_max_postings=self._max_postings, foreign_keys=False
        )
        try:
            # A real vector has unit norm; zeros stand for none (left out of the dense channel).
            given = [row if row.any() else None for row in vectors]
            with scratch.transaction() as conn:
                # Cube prefixes and ids are the items' own, so the copy's cubes are searched
                # with the same terms as the live ones.
                writes.insert_items(conn, items, given, "scratch")
            yield scratch
        finally:
            scratch.close()

    # -- files -------------------------------------------------------------------------------

    def compact(self, actor: str) -> dict[str, int]:
        """Checkpoint the WAL, ``VACUUM`` (the file rewritten without its free pages) and
        checkpoint again, truncating the WAL; then record a ``vacuum`` event.  Holds the writer
        for the whole rewrite (seconds per hundred MB): other writes wait, reads go on.

        Freed pages are zeroed (``secure_delete``) and erasure optimises the full-text index,
        so after this the erased content is nowhere in the files."""
        before = self._file_bytes()
        with self._lock, DIALECT.mapped("vacuum of", self.path):
            for statement in ("PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM",
                              "PRAGMA wal_checkpoint(TRUNCATE)"):  # fmt: skip
                self._writer.execute(statement).fetchall()
        sizes = {"bytes_before": before, "bytes_after": self._file_bytes()}
        with self.transaction() as conn:
            shared.event(DIALECT, conn, actor, None, None, "vacuum", after=sizes)
        with DIALECT.mapped("vacuum of", self.path):
            self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return sizes

    def _file_bytes(self) -> int:
        """The size of the database file and its WAL, in bytes (0 in memory)."""
        found: Iterable[Path] = [Path(self.path), Path(f"{self.path}-wal")]
        return sum(p.stat().st_size for p in found if not self._in_memory and p.exists())
