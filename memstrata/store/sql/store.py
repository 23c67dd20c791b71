"""``SQLStore``: the ``Store`` calls both SQL engines share, written once over ``SQLDatabase``.

=================  =====================  =================================================
Protocol           shared class           what the engine adds
=================  =====================  =================================================
PrincipalStore     ``SQLPrincipals``      nothing
CubeStore          ``SQLCubes``           nothing
ItemStore          ``SQLItems``           where full text and vectors live (hooks), the
                                          vector calls (``get_vectors``, ``replace_vectors``)
SearchIndex        (``get_items``)        both channels, ``next_turns``, ``named_speakers``
HistoryStore       ``SQLHistory``         ``scratch_index``
ErasureStore       ``SQLErasure``         ``compact``, the full text and vectors it drops
UsageStore         ``SQLUsage``           nothing
ArchiveStore       ``SQLArchive``         a cube's vectors, where artifact files go
=================  =====================  =================================================

An engine's store is its database class (connections, dialect, hooks, search) followed by
``SQLStore``: ``class SQLiteStore(SQLiteEngine, SQLStore)``.
"""

from __future__ import annotations

from memstrata.store.sql.archive import SQLArchive
from memstrata.store.sql.cubes import SQLCubes
from memstrata.store.sql.erasure import SQLErasure
from memstrata.store.sql.history import SQLHistory
from memstrata.store.sql.items import SQLItems
from memstrata.store.sql.principals import SQLPrincipals
from memstrata.store.sql.usage import SQLUsage


class SQLStore(SQLPrincipals, SQLCubes, SQLItems, SQLHistory, SQLErasure, SQLUsage, SQLArchive):
    """Every ``Store`` call the engines share (see the module doc); an engine completes it."""
