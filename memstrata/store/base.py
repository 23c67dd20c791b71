"""The storage seam (DESIGN §7): three small Protocols that every backend implements together.

Contract shared by all methods:

* A write method returns only once its transaction has committed (durable), and either all of it
  is stored or none of it.  Writes are serialised (one writer); reads never block on them.
* Methods take and return model objects; rows and SQL stay inside the backend.
* Backend failures are raised as ``memstrata.errors`` types, never as driver exceptions.
* ``seq`` numbers: every item change takes the next value of one counter, so a reader can fetch
  "everything changed since N" — which is how vector caches see other processes' writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from memstrata.filters import Filters
from memstrata.model import ApiKey, Cube, Event, Grant, MemoryItem, User, Version

Vectors = npt.NDArray[np.float32]
#: (item id, channel score); higher scores rank first.
Scored = tuple[str, float]


class PrincipalStore(Protocol):
    """Users, API keys, cubes and grants."""

    def put_user(self, user: User) -> None:
        """Insert a user; ``AlreadyExists`` if the id is taken."""

    def get_user(self, user_id: str) -> User | None: ...

    def list_users(self) -> list[User]: ...

    def put_key(self, key: ApiKey, key_hash: str) -> None:
        """Store a key's record and the hash of its secret (never the secret)."""

    def key_user(self, key_hash: str) -> str | None:
        """The user of the live (unrevoked) key with this hash, or None."""

    def list_keys(self, user_id: str) -> list[ApiKey]: ...

    def revoke_key(self, user_id: str, key_id: str, actor: str) -> bool:
        """Revoke a live key of ``user_id``; False if there is none with that id."""

    def erase_items(self, item_ids: Sequence[str], actor: str, reason: str | None) -> int:
        """Remove the items' content everywhere, leaving tombstones (ids, times, ops)."""

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """Delete a cube and all its content (events stay, payloads blanked); the item count."""

    def put_cube(self, cube: Cube) -> None:
        """Insert a cube and its owner's ``admin`` grant; ``AlreadyExists`` if the id is taken."""

    def get_cube(self, cube_id: str) -> Cube | None: ...

    def list_cubes(self, user_id: str) -> list[Cube]:
        """Cubes on which ``user_id`` holds any grant, oldest first."""

    def put_grant(self, grant: Grant) -> None:
        """Insert or replace the grant of (cube, user), recording an event."""

    def delete_grant(self, cube_id: str, user_id: str, actor: str) -> bool:
        """Remove the grant of (cube, user), recording an event; False if there was none."""

    def list_grants(self, cube_id: str) -> list[Grant]: ...

    def permission(self, cube_id: str, user_id: str) -> str | None:
        """The permission ``user_id`` holds on ``cube_id``, or None."""


class ItemStore(Protocol):
    """Memory items, their versions, vectors and events."""

    def add_items(self, items: Sequence[MemoryItem], vectors: Vectors, embedder: str) -> list[str]:
        """Store new items with their vectors, full text, first version and a ``create`` event.

        Items carrying an ``external_id`` already stored in their cube are not stored again: the
        existing id is returned in their place when the text is the same, and ``ConflictError``
        is raised (storing nothing) when it differs.  Returns the ids in input order.
        """

    def update_item(
        self,
        item: MemoryItem,
        vector: Vectors | None,
        *,
        op: str,
        actor: str | None,
        reason: str | None = None,
        snapshot: bool = True,
    ) -> MemoryItem:
        """Write ``item`` as the next version of the stored item with its id, with an event ``op``.

        ``vector`` replaces the stored vector when given (the text changed).  Returns the stored
        item (version, ``updated_at`` and ``seq`` advanced).  ``ItemNotFound`` if it is unknown;
        ``ConflictError`` if ``item.version`` is not the stored version (it changed since read).
        ``snapshot=False`` records the change as an event only, without a version snapshot: for
        derived items the system refreshes often (a segment gaining a page), whose every state
        can be rebuilt from their sources.
        """

    def get_items(self, item_ids: Sequence[str]) -> list[MemoryItem]:
        """The items with these ids, in the given order; unknown ids are left out."""

    def list_items(
        self,
        cube_id: str,
        filters: Filters,
        *,
        order: Literal["event_time", "heat"] = "event_time",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """A cube's items passing ``filters``, by ``order`` then id (ascending by default),
        skipping the first ``offset``."""

    def count_items(self, cube_id: str, filters: Filters) -> int: ...

    def overflowing_turns(self, cube_id: str, capacity: int) -> list[MemoryItem]:
        """Working-tier turns beyond the newest ``capacity`` of their session, oldest first.

        Items without a session form one session of their own.
        """

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        """For each of these turns, the id of the turn after it in its session (by event time,
        then id), among searchable turns; turns without a session or a successor are left out.
        """

    def record_access(self, counts: Mapping[str, int], at: datetime) -> None:
        """Add ``counts`` to the items' ``access_count`` and set ``last_accessed_at``.

        Usage statistics only: no version, no event, no change sequence (search filters do not
        depend on them).  Unknown ids are ignored.
        """

    def get_vectors(self, item_ids: Sequence[str]) -> Vectors:
        """The stored vectors of these items, one row each in order; ``ItemNotFound`` if any
        has none."""

    def versions(self, item_id: str) -> list[Version]:
        """Every version of an item, oldest first."""

    def events(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        """Events, oldest first, narrowed by cube, item and time."""

    def cubes_with_items_of(self, user_id: str) -> list[str]:
        """The cubes holding items added by ``user_id`` (their ``user_id``)."""

    def items_as_of(self, cube_id: str, at: datetime) -> list[MemoryItem]:
        """Every item of a cube as its latest version written at or before ``at`` stood
        (items first written after ``at`` are absent), by event time."""

    def iter_items(self, cube_id: str) -> Iterator[MemoryItem]:
        """Every item of a cube that has a vector, in id order (streamed)."""

    def replace_vectors(
        self, cube_id: str, item_ids: Sequence[str], vectors: Vectors, embedder: str
    ) -> None:
        """Swap in new vectors for these items and record ``embedder`` on the cube, atomically."""


class SearchIndex(Protocol):
    """The two retrieval channels; both restrict to ``cube_ids`` and ``filters``."""

    def keyword_search(
        self, query: str, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        """Best-first BM25 matches (score: negated BM25, higher is better)."""

    def vector_search(
        self, vector: Vectors, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        """Best-first exact cosine matches (score in [-1, 1])."""


class Store(PrincipalStore, ItemStore, SearchIndex, Protocol):
    """A complete backend, plus file-level settings and closing."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...
