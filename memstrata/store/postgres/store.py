"""The scale-out backend: PostgreSQL with pgvector (DESIGN §7), for many processes on many
machines.

``PostgresStore`` is composed of one class per Protocol of ``memstrata.store.base``, all standing
on the same ``PostgresDatabase`` (a connection pool; see ``connection.py``), module for module as
``SQLiteStore`` is:

=================  ========================  ===============
Protocol           class                     module
=================  ========================  ===============
PrincipalStore     ``PostgresPrincipals``    principals.py
CubeStore          ``PostgresCubes``         cubes.py
ItemStore          ``PostgresItems``         items.py
SearchIndex        ``PostgresSearch``        search.py
HistoryStore       ``PostgresHistory``       history.py
ErasureStore       ``PostgresErasure``       erasure.py
UsageStore         ``PostgresUsage``         usage.py
ArchiveStore       ``PostgresArchive``       interchange.py
=================  ========================  ===============
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from memstrata.errors import MemCubeError
from memstrata.store import artifacts
from memstrata.store.postgres.cubes import PostgresCubes
from memstrata.store.postgres.erasure import PostgresErasure
from memstrata.store.postgres.history import PostgresHistory
from memstrata.store.postgres.interchange import PostgresArchive
from memstrata.store.postgres.principals import PostgresPrincipals
from memstrata.store.postgres.search import PostgresSearch
from memstrata.store.postgres.usage import PostgresUsage


class PostgresStore(
    PostgresPrincipals,
    PostgresCubes,
    PostgresSearch,
    PostgresHistory,
    PostgresErasure,
    PostgresUsage,
    PostgresArchive,
):
    """``Store`` over one PostgreSQL database (``postgresql://…``).  Thread-safe; any number of
    processes may share it.

    ``PostgresStore(dsn, pool_size=…, keyword_max_postings=…, artifacts_dir=…)``.
    """

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """``ErasureStore.delete_cube``, then the cube's artifact files (KV caches, adapters)."""
        count = super().delete_cube(cube_id, actor)
        with contextlib.suppress(MemCubeError):  # a store without an artifact folder has none
            artifacts.remove_folder(self.artifact_dir(cube_id))
        return count

    def __init__(self, dsn: str, *, artifacts_dir: str | Path | None = None, **options: Any):
        super().__init__(dsn, **options)
        self.artifacts_dir = None if artifacts_dir is None else Path(artifacts_dir)
