"""The storage seam: small Protocols that a backend implements together as ``Store``.

==================  =====================================================================  ====
Protocol            what                                                                   size
==================  =====================================================================  ====
``PrincipalStore``  users and API keys                                                        8
``CubeStore``       cubes, grants, permission checks                                          7
``ItemStore``       memory items with their vectors and full text                            12
``SearchIndex``     the keyword and dense channels, plus what a ranking reads back            8
``HistoryStore``    versions, events, a cube as it stood, and a search index over that        4
``ErasureStore``    content removed for good (erasure, cube deletion), expired items          5
``UsageStore``      LLM calls and tokens per cube                                             3
``ArchiveStore``    whole cubes as ``MemCube`` objects (export and import)                    3
``ArtifactStore``   a cube's artifact files and rows (KV caches, adapters, images)            5
``Store``           all of the above, plus file-level settings and ``close``                   +3
==================  =====================================================================  ====

Sizes are the calls each declares (``tests/store/test_protocols.py`` checks them).  Retrieval
ranks a ``SearchIndex`` (the live store, or a scratch copy of a past state).  A consumer is typed
by the Protocols it uses: one of the above, or an intersection that declares nothing of its own,
named for its use (a ``Store`` is each of them; the test checks each line against its bases):

* ``TierStore`` = ``ItemStore`` + ``SearchIndex``: the mid and long tiers, placing and promoting.
* ``CubeItems`` = ``CubeStore`` + ``ItemStore``: read counts heating segments by cube settings.
* ``ConsolidationStore`` = ``CubeStore`` + ``TierStore``: consolidation under cube settings.
* ``TierTaskStore`` = ``ConsolidationStore`` + ``UsageStore``: the tier tasks (LLM reads counted).
* ``ErasureScope`` = ``CubeStore`` + ``ItemStore`` + ``ErasureStore``: erasure and expiry.
* ``FeedbackStore`` = ``TierStore`` + ``ErasureStore``: feedback (find, supersede, forget).
* ``ArchiveTarget`` = ``CubeStore`` + ``ArchiveStore`` + ``ArtifactStore``: a MemCube import.
* ``ModelStateStore`` = ``CubeStore`` + ``ItemStore`` + ``ArtifactStore``: KV caches, adapters.
* ``AccessStore`` = ``PrincipalStore`` + ``CubeStore`` + ``ItemStore``: the grant checks.

Only what really needs most of them holds the whole ``Store`` (the core's parts, migration).  The
task queue is a Protocol of its own (``store/queue.py``).  The SQL engines implement them
together through one shared layer (``store/sql/``); an engine runs the conformance suite of
``tests/store``.

Contract shared by all methods:

* A write method returns only once its transaction has committed (durable), and either all of it
  is stored or none of it.  Writes are serialised (one writer); reads never block on them.
* Methods take and return model objects; rows and SQL stay inside the backend.
* Backend failures are raised as ``memstrata.errors`` types, never as driver exceptions.
* Implementations are thread-safe.
* ``seq`` numbers: every item change takes the next value of one counter, so a reader can fetch
  "everything changed since N" — which is how vector caches see other processes' writes.
* Every call that reads or writes items names their cube (``cube_ids``, ``cube_id``, or the
  item's own ``cube_id``), so a store sharded by cube routes it to the node holding the cube;
  an item of another cube is as unknown as one never stored.  The one exception is
  ``ItemStore.item_cubes``, which finds the cube of an item known by its id alone (on a sharded
  store it asks every node, one index read each).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from memstrata.filters import Filters
from memstrata.memcube import Artifact, MemCube
from memstrata.model import ApiKey, Cube, Event, Grant, LLMUsage, MemoryItem, User, Version

#: float32 vectors: one ``(dim,)`` vector, or an ``(n, dim)`` matrix of unit-norm rows.
Vectors = npt.NDArray[np.float32]
#: (item id, channel score); higher scores rank first.
Scored = tuple[str, float]


class PrincipalStore(Protocol):
    """Users and their API keys.  Each write records an event."""

    def put_user(self, user: User) -> None:
        """Insert a user; ``AlreadyExists`` if the id is taken."""

    def get_user(self, user_id: str) -> User | None:
        """The user with this id, or None."""

    def list_users(self) -> list[User]:
        """Every user, oldest first."""

    def put_key(self, key: ApiKey, key_hash: str) -> None:
        """Store a key's record (revoked already when ``key.revoked_at`` is set) and the hash of
        its secret (never the secret)."""

    def key_user(self, key_hash: str) -> str | None:
        """The user of the live (unrevoked) key with this hash, or None."""

    def list_keys(self, user_id: str) -> list[ApiKey]:
        """The user's keys, revoked ones included, oldest first."""

    def key_hashes(self, user_id: str) -> dict[str, str]:
        """The hash stored for each of the user's keys, by key id (to copy keys elsewhere)."""

    def revoke_key(self, user_id: str, key_id: str, actor: str) -> bool:
        """Revoke a live key of ``user_id``; False if there is none with that id."""


class CubeStore(Protocol):
    """Cubes and the grants that say who may use them.  Each write records an event."""

    def put_cube(self, cube: Cube) -> None:
        """Insert a cube and its owner's ``admin`` grant; ``AlreadyExists`` if the id is taken."""

    def get_cube(self, cube_id: str) -> Cube | None:
        """The cube with this id, or None."""

    def list_cubes(self, user_id: str) -> list[Cube]:
        """Cubes on which ``user_id`` holds any grant, oldest first."""

    def put_grant(self, grant: Grant) -> None:
        """Insert or replace the grant of (cube, user)."""

    def delete_grant(self, cube_id: str, user_id: str, actor: str) -> bool:
        """Remove the grant of (cube, user); False if there was none."""

    def list_grants(self, cube_id: str) -> list[Grant]:
        """The cube's grants, oldest first."""

    def permission(self, cube_id: str, user_id: str) -> str | None:
        """The permission ``user_id`` holds on ``cube_id``, or None."""


class ItemStore(Protocol):
    """Memory items, their vectors and full text; each change keeps a version and an event."""

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
        can be rebuilt from their sources.  The stored item is the one of ``item.cube_id``.
        """

    def get_items(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> list[MemoryItem]:
        """The items with these ids in these cubes, in the given order; unknown ids, and ids
        of items in other cubes, are left out."""

    def item_cubes(self, item_ids: Sequence[str]) -> dict[str, str]:
        """The cube of each of these items, by id; unknown ids are left out.

        The one item query that names no cube: for a caller that knows an item by its id alone
        (``GET /memories/{id}``, an MCP or CLI call by id), which then reads it with its cube.
        On a sharded store it asks every node (one index read each).
        """

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

    def count_items(self, cube_id: str, filters: Filters) -> int:
        """How many of a cube's items pass ``filters``."""

    def overflowing_turns(
        self, cube_id: str, capacity: int, idle_s: float | None = None
    ) -> list[MemoryItem]:
        """Working-tier turns beyond the newest ``capacity`` of their session, and with
        ``idle_s`` every working turn of a session whose newest turn is more than ``idle_s``
        seconds (event time) older than the cube's newest working turn; oldest first.

        Items without a session form one session of their own.
        """

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        """For each of these turns, the id of the turn after it in its session (by event time,
        then id), among searchable turns; turns without a session or a successor are left out.
        """

    def record_access(self, cube_id: str, counts: Mapping[str, int], at: datetime) -> None:
        """Add ``counts`` to the ``access_count`` of these items of ``cube_id`` and set their
        ``last_accessed_at``.

        Usage statistics only: no version, no event, no change sequence (search filters do not
        depend on them).  Unknown ids (and ids of other cubes) are ignored.
        """

    def iter_items(self, cube_id: str) -> Iterator[MemoryItem]:
        """Every item of a cube that has a vector, in id order (streamed)."""

    def get_vectors(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> Vectors:
        """The stored vectors of these items of these cubes, one row each in order;
        ``ItemNotFound`` if any has none (or is in none of the cubes)."""

    def replace_vectors(
        self, cube_id: str, item_ids: Sequence[str], vectors: Vectors, embedder: str
    ) -> None:
        """Swap in new vectors for these items and record ``embedder`` on the cube, atomically."""


class SearchIndex(Protocol):
    """The two retrieval channels over a set of items, and what a ranking reads back of them.

    Both channels restrict to ``cube_ids`` and ``filters`` and return at most ``limit`` hits,
    best first.
    """

    def keyword_search(
        self,
        query: str,
        cube_ids: Sequence[str],
        filters: Filters,
        limit: int,
        *,
        max_postings: int | None = None,
    ) -> list[Scored]:
        """BM25 matches of the query's terms (score: negated BM25, higher is better).

        Only the query's rarest terms are matched, up to ``max_postings`` postings in these
        cubes (at least one term); None means the backend's own budget.
        """

    def vector_search(
        self, vector: Vectors, cube_ids: Sequence[str], filters: Filters, limit: int
    ) -> list[Scored]:
        """Exact cosine matches of a unit ``(dim,)`` query vector (score in [-1, 1])."""

    def get_items(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> list[MemoryItem]:
        """The items with these ids in these cubes (a search's), in the given order; unknown
        ids are left out."""

    def get_vectors(self, item_ids: Sequence[str], cube_ids: Sequence[str]) -> Vectors:
        """The stored vectors of these items of these cubes, one row each in order;
        ``ItemNotFound`` if any has none (the feedback pass reads its first pass's best
        items')."""

    def next_turns(self, cube_id: str, item_ids: Sequence[str]) -> dict[str, str]:
        """For each of these turns, the next searchable turn of its session (see ``ItemStore``)."""

    def vector_index_due(self, cube_id: str) -> bool:
        """Whether ``build_vector_index`` has work worth a background task (cheap: called after
        each add); always False for an engine that keeps its dense index itself."""

    def build_vector_index(self, cube_id: str) -> int:
        """Build or extend the cube's approximate dense index (slow: run it in the background,
        never on the add or search path); returns how many vectors it took in."""

    def named_speakers(self, cube_ids: Sequence[str], names: Sequence[str]) -> set[str]:
        """Which of ``names`` (compared without regard to case) speak in a searchable item of
        these cubes, each spelt as stored."""


class HistoryStore(Protocol):
    """The past: every version of an item, the audit events, and a cube as it stood."""

    def versions(self, cube_id: str, item_id: str) -> list[Version]:
        """Every version of the item ``item_id`` of ``cube_id``, oldest first."""

    def events(
        self,
        *,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        """Events, oldest first, narrowed by cube, item and time."""

    def items_as_of(self, cube_id: str, at: datetime) -> list[MemoryItem]:
        """Every item of a cube as its latest version written at or before ``at`` stood
        (items first written after ``at`` are absent), by event time."""

    def scratch_index(
        self, items: Sequence[MemoryItem], vectors: Vectors
    ) -> AbstractContextManager[SearchIndex]:
        """A temporary ``SearchIndex`` over exactly ``items``, searched by the same engine as the
        live store (same tokenizer, term choice, BM25 and cosine); gone when the context exits.

        Row i of ``vectors`` is item i's vector; a row of zeros means the item has none (it is
        left out of the dense channel).  BM25's collection statistics are those of ``items``
        (the live index's span the whole database), so keyword scores may differ from the live
        ones by a little.  Kept in memory only: nothing of it reaches a disk.
        """


class ErasureStore(Protocol):
    """Content removed for good, leaving tombstones (ids, times, ops)."""

    def cubes_with_items_of(self, user_id: str) -> list[str]:
        """The cubes holding items added by ``user_id`` (their ``user_id``), by id."""

    def expired_items(
        self, at: datetime, limit: int, cube_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """(cube id, item id) of the items whose ``expires_at`` is at or before ``at``, earliest
        expiry first, at most ``limit``; only those of ``cube_ids`` when given.  Whatever their
        status; an erased item never (erasure clears its ``expires_at``)."""

    def erase_items(
        self,
        item_ids: Sequence[str],
        cube_ids: Sequence[str],
        actor: str,
        reason: str | None,
        *,
        subject: str | None = None,
    ) -> int:
        """Remove the content of these items of these cubes everywhere (versions, vectors,
        full text, event payloads), leaving tombstones; how many were erased (tombstones
        already, and ids of other cubes, are not counted).  With
        ``subject`` (a data subject's erasure) each cube that lost items also records one
        ``erase_subject`` event naming the subject and the count."""

    def delete_cube(self, cube_id: str, actor: str) -> int:
        """Delete a cube and all its content (events stay, payloads blanked); the item count."""

    def compact(self, actor: str) -> dict[str, int]:
        """Rewrite the database's files without free space, so that what erasures removed
        leaves them (SQLite: ``VACUUM`` between WAL checkpoints; PostgreSQL: ``VACUUM FULL`` of
        the tables that hold content); records one ``vacuum`` event (no cube) by ``actor``.
        Returns ``{"bytes_before", "bytes_after"}``: the files' (or tables') size around it."""


class UsageStore(Protocol):
    """LLM calls and tokens counted per cube."""

    def record_usage(self, cube_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one LLM call and its tokens against ``cube_id`` (no count is ever lost to a
        concurrent writer)."""

    def llm_usage(self, cube_id: str) -> LLMUsage:
        """``cube_id``'s totals so far (zeros for a cube that never used an LLM)."""

    def llm_usage_by_day(self, cube_id: str, days: int) -> list[tuple[str, LLMUsage]]:
        """``cube_id``'s usage per UTC day over the last ``days`` days, days with calls only,
        oldest first, as (``YYYY-MM-DD``, usage)."""


class ArchiveStore(Protocol):
    """Whole cubes as ``MemCube`` objects: the store side of export and import (docs/memcube.md)."""

    def read_cube(self, cube_id: str) -> MemCube:
        """Every row of ``cube_id`` as one consistent snapshot (items in id order, events
        oldest first).  ``CubeNotFound``; ``ConfigurationError`` if its vectors are not all the
        cube's embedder's (re-embed it first)."""

    def check_free(self, data: MemCube) -> None:
        """``AlreadyExists`` if the cube id, an item id or an artifact id of ``data`` is taken."""

    def insert_cube(
        self,
        data: MemCube,
        *,
        artifact_paths: Mapping[str, str],
        note: Mapping[str, Any],
        actor: str | None = None,
    ) -> None:
        """Store ``data`` as a new cube (owner: ``data.cube.owner``, given ``admin``), its
        artifacts' rows at ``artifact_paths`` (by artifact id), and one ``import`` event by
        ``actor`` (default: the owner) with payload ``note``; all or nothing.  Ids, user ids and
        actors are stored as ``data`` has them (the core decides them).  ``AlreadyExists`` as
        ``check_free``."""


class ArtifactStore(Protocol):
    """A cube's artifacts: files the core derives from it (KV caches, LoRA adapters) or keeps
    beside its items (images), each a file under ``artifact_dir`` and a row (docs/memcube.md)."""

    def artifact_dir(self, cube_id: str) -> Path:
        """The directory the files of ``cube_id``'s artifacts are stored in; ``MemCubeError``
        if this store has none (it lives in memory)."""

    def put_artifact(
        self,
        cube_id: str,
        kind: str,
        fingerprint: str,
        data: bytes,
        metadata: Mapping[str, Any],
    ) -> Artifact:
        """Store ``data`` as a new artifact of ``cube_id`` (``kind``: ``kv_cache`` or ``lora``):
        its file under ``artifact_dir`` (written aside, then renamed), then its row.
        ``CubeNotFound``; ``MemCubeError`` for a store without an artifact folder; the file
        is removed again if the row cannot be written."""

    def artifacts(self, cube_id: str, kind: str | None = None) -> list[Artifact]:
        """``cube_id``'s artifacts (only ``kind``'s when given), oldest first."""

    def delete_artifacts(self, cube_id: str, artifact_ids: Sequence[str]) -> int:
        """Delete these artifacts of ``cube_id`` (others' ids are ignored): their rows, then
        their files; how many went."""

    def artifact_key(self) -> bytes:
        """The secret the server seals its artifacts with (``memory.artifacts``): 32 random
        bytes made by the first call on this database and kept in it (``meta``), the same for
        every process that shares it; never exported."""


class Store(
    PrincipalStore,
    CubeStore,
    ItemStore,
    SearchIndex,
    HistoryStore,
    ErasureStore,
    UsageStore,
    ArchiveStore,
    ArtifactStore,
    Protocol,
):
    """A complete backend, plus file-level settings and closing."""

    def get_meta(self, key: str) -> str | None:
        """The file-level setting ``key`` (e.g. the embedder a file was made with), or None."""

    def set_meta(self, key: str, value: str) -> None:
        """Set the file-level setting ``key``."""

    def close(self) -> None:
        """Release every connection; the store is unusable afterwards."""


# Intersections: what one consumer uses of several Protocols, named for that use (see the module
# docstring's list).  They declare nothing, so a ``Store`` is each of them.


class TierStore(ItemStore, SearchIndex, Protocol):
    """What the mid and long tiers place and promote items with: the items, and the dense
    channel that finds the nearest segment or fact."""


class CubeItems(CubeStore, ItemStore, Protocol):
    """Items read and written under their cube's settings (read counts heating segments)."""


class ConsolidationStore(CubeStore, TierStore, Protocol):
    """What consolidation uses: a cube's settings, its working turns and the tiers' calls."""


class TierTaskStore(ConsolidationStore, UsageStore, Protocol):
    """What the tier tasks use: consolidation and promotion, and the LLM calls they count."""


class ErasureScope(CubeStore, ItemStore, ErasureStore, Protocol):
    """What erasure and expiry use: the cubes and grants a scope is checked against, the items
    it reaches (derived ones found through their sources), and the erasure calls."""


class FeedbackStore(TierStore, ErasureStore, Protocol):
    """What feedback uses: both channels to find what a statement is about, the items it
    supersedes or writes, and erasure (a request to forget; expired items stay hidden)."""


class ArchiveTarget(CubeStore, ArchiveStore, ArtifactStore, Protocol):
    """Where a MemCube import lands: the free ids check and the rows (``ArchiveStore``), the
    artifacts' folder, and the cube as stored."""


class ModelStateStore(CubeStore, ItemStore, ArtifactStore, Protocol):
    """What the model state makers (KV caches, LoRA adapters) use: a cube's items, read into
    the state, and its artifacts, which hold it."""


class AccessStore(PrincipalStore, CubeStore, ItemStore, Protocol):
    """What the grant and identity checks read: users, cubes and grants, and an item's cube."""
