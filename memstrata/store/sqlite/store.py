"""The default backend: one SQLite file (WAL), FTS5 full text, numpy vector search.

``SQLiteStore`` is composed of one class per Protocol of ``memstrata.store.base``, all standing
on the same ``SQLiteDatabase`` (one writer, per-thread readers; see ``connection.py``):

=================  ======================  ===============
Protocol           class                   module
=================  ======================  ===============
PrincipalStore     ``SQLitePrincipals``    principals.py
CubeStore          ``SQLiteCubes``         cubes.py
ItemStore          ``SQLiteItems``         items.py
SearchIndex        ``SQLiteSearch``        search.py
HistoryStore       ``SQLiteHistory``       history.py
ErasureStore       ``SQLiteErasure``       erasure.py
UsageStore         ``SQLiteUsage``         usage.py
ArchiveStore       ``SQLiteArchive``       interchange.py
=================  ======================  ===============

Row layout is written in one place (``rows.py``, ``writes.py``) and shared by all of them.
"""

from __future__ import annotations

import contextlib

from memstrata.errors import MemCubeError
from memstrata.store import artifacts
from memstrata.store.rows import fts_body
from memstrata.store.sqlite.clauses import filter_sql
from memstrata.store.sqlite.cubes import SQLiteCubes
from memstrata.store.sqlite.erasure import SQLiteErasure
from memstrata.store.sqlite.history import SQLiteHistory
from memstrata.store.sqlite.interchange import SQLiteArchive
from memstrata.store.sqlite.principals import SQLitePrincipals
from memstrata.store.sqlite.search import SQLiteSearch
from memstrata.store.sqlite.usage import SQLiteUsage

__all__ = ["SQLiteStore", "filter_sql", "fts_body"]


class SQLiteStore(
    SQLitePrincipals,
    SQLiteCubes,
    SQLiteSearch,
    SQLiteHistory,
    SQLiteErasure,
    SQLiteUsage,
    SQLiteArchive,
):
    """``Store`` over one SQLite file.  Thread-safe; safe to share a file between processes.

    ``SQLiteStore(path, busy_timeout_ms=…, synchronous=…, keyword_max_postings=…)``; see
    ``SQLiteDatabase`` for the connections and ``SQLiteSearch`` for the postings budget.
    """

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """``ErasureStore.delete_cube``, then the cube's artifact files (KV caches, adapters)."""
        count = super().delete_cube(cube_id, actor)
        with contextlib.suppress(MemCubeError):  # a store without an artifact folder has none
            artifacts.remove_folder(self.artifact_dir(cube_id))
        return count
