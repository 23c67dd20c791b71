"""Storage behind small Protocols; ``Store`` is all of them, ``sqlite`` the default."""

from memstrata.store.base import (
    ArchiveStore,
    ArtifactStore,
    CubeStore,
    ErasureStore,
    HistoryStore,
    ItemStore,
    PrincipalStore,
    SearchIndex,
    Store,
    UsageStore,
)

__all__ = [
    "ArchiveStore",
    "ArtifactStore",
    "CubeStore",
    "ErasureStore",
    "HistoryStore",
    "ItemStore",
    "PrincipalStore",
    "SearchIndex",
    "Store",
    "UsageStore",
]
