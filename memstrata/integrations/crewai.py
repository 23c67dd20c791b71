"""CrewAI over memstrata: ``MemstrataStorage``, a ``StorageBackend`` of CrewAI's unified
``Memory`` whose records are memstrata memories.  Needs the ``crewai`` extra (installed in an
environment of its own: see docs/integrations/crewai.md); that page has the mapping and an
example.

Mapping (``memstrata.integrations.mapping``):

* One storage is one user (``user_id=``; with a client, its key's owner) in one cube
  (``cube_id=`` or the user's default cube), and within it one session, named for the storage
  (``name=``, default ``crewai``).  Two users' storages are two cubes: neither reads the other.
* A ``MemoryRecord`` is one memstrata item (a turn, which search and the tiers read like any
  other): its text is the record's content; its id, scope, categories, metadata, importance,
  times, source and privacy are item metadata (``crew.id``, ``crew.record``), and its scope is
  also one metadata key per level (``crew.scope.0`` …), so a scope prefix is a filter the store
  answers in SQL.  Scopes are paths: ``/a`` contains ``/a/b`` but not ``/ab``.
* ``search`` receives CrewAI's query *vector*, not its text.  ``embedder`` (give it to
  ``Memory(embedder=storage.embedder)``) embeds with memstrata's model and remembers, in a
  bounded map, which text each vector it made came from; ``search`` runs memstrata's hybrid
  search (keywords and meaning, fused: the order is ours) on that text.  The core has no search
  by a bare vector, so a vector this embedder did not make is a ``ValidationError`` naming the
  fix.  A hit's score is the cosine similarity of the query and the hit's text under the same
  embedder, in [0, 1], as CrewAI's scoring expects.
* ``delete`` and ``reset`` erase for good (with what the tiers derived); ``save`` and ``update``
  of an id already stored write a new version of that item.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

import numpy as np
from crewai.memory.storage.backend import StorageBackend
from crewai.memory.types import MemoryRecord, ScopeInfo
from pydantic import ValidationError as PydanticError

from memstrata.config import Settings
from memstrata.embed import DEFAULT_EMBEDDER, Embedder, make_embedder
from memstrata.errors import ValidationError
from memstrata.integrations import mapping
from memstrata.limits import MAX_QUERY_CHARS, MAX_TOP_K
from memstrata.memory.aio import AsyncMemoryOS
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem

__all__ = ["MemstrataStorage", "RecallingEmbedder"]

#: Metadata keys of a record: the storage it belongs to (its session), its CrewAI id, the
#: record's fields but content, and its scope as a path.
MARK, ID, RECORD, SCOPE = "crew.storage", "crew.id", "crew.record", "crew.scope"
#: Items read per call while a listing pages through the storage.
PAGE = MAX_TOP_K
#: The most records one listing, count or scope query reads (CrewAI's LanceDB storage caps its
#: scans at the same number).
SCAN_LIMIT = 50_000
#: Vectors the embedder remembers the text of (and texts it remembers the vector of): CrewAI
#: searches with a vector just after making it, so this only needs to cover one batch of saves.
REMEMBERED = 2048
#: What a delete or reset records as its reason.
REASON = "CrewAI memory delete"
V = TypeVar("V")


class RecallingEmbedder:
    """CrewAI's embedder callable (``texts -> vectors``) over a memstrata ``Embedder``.

    It remembers, for the last ``REMEMBERED`` vectors it made, the text each came from (its
    first ``MAX_QUERY_CHARS`` characters, what a search reads), so a storage can search by the
    text of a vector CrewAI hands back; and the vector of each text, so scores need no second
    embedding.  Safe to call from CrewAI's worker threads."""

    def __init__(self, embedder: Embedder, *, size: int = REMEMBERED) -> None:
        self.embedder = embedder
        self._size = size
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._vectors: OrderedDict[bytes, np.ndarray[Any, np.dtype[np.float32]]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts`` (unit length, memstrata's model), remembered."""
        return [row.tolist() for row in self.vectors(list(texts))]

    def vectors(self, texts: Sequence[str]) -> list[np.ndarray[Any, np.dtype[np.float32]]]:
        """The vectors of ``texts``, embedding only those not remembered (in one batch)."""
        with self._lock:
            known = {t: self._vectors.get(_text_key(t)) for t in texts}
        missing = [t for t, v in known.items() if v is None]
        if missing:
            made = self.embedder.embed_passages(missing)
            with self._lock:
                for text, row in zip(missing, made, strict=True):
                    known[text] = row
                    self._remember(text, row)
        return [known[t] for t in texts]  # type: ignore[misc]  # every text was filled in

    def text_of(self, vector: Sequence[float]) -> str | None:
        """The text this embedder made ``vector`` from, or None when it does not know it."""
        key = _vector_key(vector)
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
        return text

    def _remember(self, text: str, row: np.ndarray[Any, np.dtype[np.float32]]) -> None:
        _put(self._texts, _vector_key(row), text[:MAX_QUERY_CHARS], self._size)
        _put(self._vectors, _text_key(text), row, self._size)


class MemstrataStorage(StorageBackend):
    """CrewAI's memory storage, kept by memstrata (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``
    (``mapping.Backend``); ``user_id`` the acting user (created if missing; with a client, its
    key's owner, and may be omitted); ``cube_id`` the cube (created, owned by the user, if
    missing; default: the user's default cube; one the user may not read is
    ``PermissionDenied``); ``name`` the storage (its session in the cube).  ``embedder`` is the
    memstrata ``Embedder`` of ``self.embedder`` (default: the memory's own, or for a client the
    default local model).  With an ``AsyncClient`` use the ``a…`` calls.
    """

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        cube_id: str | None = None,
        name: str = "crewai",
        embedder: Embedder | None = None,
    ) -> None:
        self.memory = memory
        self.backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)
        self.session = mapping.line_id(name, "crew")
        self.embedder = RecallingEmbedder(embedder or _own_embedder(memory))

    @property
    def cube_id(self) -> str:
        """The storage's cube."""
        return self.backend.cube_id

    # -- writing -----------------------------------------------------------------------------

    def save(self, records: list[MemoryRecord]) -> None:
        """Store ``records``: new ids in one ``add``, ids already stored as new versions."""
        new: list[dict[str, Any]] = []
        for record in records:
            existing = self._find(record.id)
            if existing is None:
                new.append({"content": record.content, "metadata": self._metadata(record)})
            else:
                self._replace(existing, record)
        for start in range(0, len(new), MAX_TOP_K):
            self.backend.add(
                new[start : start + MAX_TOP_K], cube_id=self.cube_id, session_id=self.session
            )

    def update(self, record: MemoryRecord) -> None:
        """Replace the record of ``record.id`` (stored anew when there is none)."""
        existing = self._find(record.id)
        if existing is None:
            self.save([record])
        else:
            self._replace(existing, record)

    def delete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        """Erase the records matching every criterion given; how many were erased."""
        wanted = None if record_ids is None else set(record_ids)
        doomed = [
            item.id
            for item, record in self._scan(scope_prefix)
            if (wanted is None or record.id in wanted)
            and _matches(record, categories, metadata_filter)
            and (older_than is None or _before(record.created_at, older_than))
        ]
        for item_id in doomed:
            self.backend.erase(item_id, cube_id=self.cube_id, reason=REASON)
        return len(doomed)

    def reset(self, scope_prefix: str | None = None) -> None:
        """Erase every record under ``scope_prefix`` (all the storage's: ``None`` or ``/``)."""
        if _labels(scope_prefix):
            self.delete(scope_prefix=scope_prefix)
        else:
            self.backend.erase(cube_id=self.cube_id, session_id=self.session, reason=REASON)

    # -- reading -----------------------------------------------------------------------------

    def search(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        """The records best matching the text of ``query_embedding`` (memstrata's hybrid
        search, in its order), each with its cosine similarity to the query, in [0, 1]."""
        if limit <= 0:
            return []
        text = self.embedder.text_of(query_embedding)
        if text is None:
            raise ValidationError(
                "this query vector was not made by the storage's embedder, and memstrata "
                "searches by text",
                hint="Memory(storage=storage, embedder=storage.embedder)",
            )
        labels = _labels(scope_prefix)
        oversample = 3 if categories or metadata_filter else 1
        hits = self.backend.search(
            text, cube_ids=[self.cube_id], top_k=min(MAX_TOP_K, limit * oversample),
            filters={"metadata": self._filter(labels)},
        )  # fmt: skip
        found = [(h.item, r) for h in hits if (r := _record(h.item)) is not None]
        found = [
            (item, r) for item, r in found
            if _in_scope(r, labels) and _matches(r, categories, metadata_filter)
        ]  # fmt: skip
        query = np.asarray(query_embedding, dtype=np.float32)
        vectors = self.embedder.vectors([item.text for item, _ in found])
        out: list[tuple[MemoryRecord, float]] = []
        for (_, record), vector in zip(found, vectors, strict=True):
            score = max(0.0, min(1.0, float(np.dot(query, vector))))
            if score >= min_score:
                out.append((record.model_copy(update={"embedding": vector.tolist()}), score))
        return out[:limit]

    def get_record(self, record_id: str) -> MemoryRecord | None:
        """The record of ``record_id``, or None."""
        item = self._find(record_id)
        return None if item is None else _record(item)

    def list_records(
        self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[MemoryRecord]:
        """The records under ``scope_prefix``, newest first (by ``created_at``)."""
        if limit <= 0 or offset < 0:
            return []
        records = [r for _, r in self._scan(scope_prefix)]
        records.reverse()  # stored oldest first: among equal times the newest comes first
        records.sort(key=lambda r: _utc(r.created_at), reverse=True)
        return records[offset : offset + limit]

    def get_scope_info(self, scope: str) -> ScopeInfo:
        """The count, categories, oldest and newest record and child scopes of ``scope``."""
        labels = _labels(scope)
        records = [r for _, r in self._scan(scope)]
        times = [r.created_at for r in records]
        return ScopeInfo(
            path=scope.rstrip("/") or "/",
            record_count=len(records),
            categories=sorted({c for r in records for c in r.categories}),
            oldest_record=min(times, key=_utc) if times else None,
            newest_record=max(times, key=_utc) if times else None,
            child_scopes=_children(records, labels),
        )

    def list_scopes(self, parent: str = "/") -> list[str]:
        """The immediate child scopes of ``parent``, as paths."""
        labels = _labels(parent)
        return _children((r for _, r in self._scan(parent)), labels)

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        """Each category under ``scope_prefix`` and how many records carry it."""
        counts: dict[str, int] = {}
        for _, record in self._scan(scope_prefix):
            for category in record.categories:
                counts[category] = counts.get(category, 0) + 1
        return counts

    def count(self, scope_prefix: str | None = None) -> int:
        """How many records are under ``scope_prefix`` (all: ``None``)."""
        return sum(1 for _ in self._scan(scope_prefix))

    def close(self) -> None:
        """Nothing to release: the memory given stays open (its owner closes it)."""

    # -- async forms (off the event loop: ``mapping.Backend.offload``) -----------------------

    async def asave(self, records: list[MemoryRecord]) -> None:
        await self.backend.offload(self.save, records)

    async def asearch(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        return await self.backend.offload(
            self.search, query_embedding, scope_prefix, categories, metadata_filter, limit,
            min_score,
        )  # fmt: skip

    async def adelete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        return await self.backend.offload(
            self.delete, scope_prefix, categories, record_ids, older_than, metadata_filter
        )

    async def aupdate(self, record: MemoryRecord) -> None:
        await self.backend.offload(self.update, record)

    async def areset(self, scope_prefix: str | None = None) -> None:
        await self.backend.offload(self.reset, scope_prefix)

    async def acount(self, scope_prefix: str | None = None) -> int:
        return await self.backend.offload(self.count, scope_prefix)

    async def alist_records(
        self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[MemoryRecord]:
        return await self.backend.offload(self.list_records, scope_prefix, limit, offset)

    async def aget_record(self, record_id: str) -> MemoryRecord | None:
        return await self.backend.offload(self.get_record, record_id)

    # -- the cube ----------------------------------------------------------------------------

    def _filter(self, labels: Sequence[str]) -> dict[str, Any]:
        return {MARK: self.session, **mapping.path_filter(SCOPE, labels)}

    def _metadata(self, record: MemoryRecord) -> dict[str, Any]:
        fields = record.model_dump(mode="json", exclude={"id", "content", "embedding"})
        return {
            MARK: self.session, ID: record.id, RECORD: fields,
            **mapping.path_metadata(SCOPE, _labels(record.scope)),
        }  # fmt: skip

    def _replace(self, item: MemoryItem, record: MemoryRecord) -> None:
        self.backend.update(
            item.id, cube_id=self.cube_id, text=record.content, metadata=self._metadata(record)
        )

    def _find(self, record_id: str) -> MemoryItem | None:
        page = self.backend.list_memories(
            self.cube_id, filters={"metadata": {MARK: self.session, ID: record_id}}, limit=1
        )
        return page[0] if page else None

    def _scan(self, scope_prefix: str | None) -> Iterator[tuple[MemoryItem, MemoryRecord]]:
        """The records under ``scope_prefix``, oldest first, at most ``SCAN_LIMIT`` read."""
        labels = _labels(scope_prefix)
        metadata = self._filter(labels)
        for offset in range(0, SCAN_LIMIT, PAGE):
            page = self.backend.list_memories(
                self.cube_id, filters={"metadata": metadata}, limit=PAGE, offset=offset
            )
            for item in page:
                record = _record(item)
                if record is not None and _in_scope(record, labels):
                    yield item, record
            if len(page) < PAGE:
                return


def _own_embedder(memory: mapping.Memory) -> Embedder:
    """The memory's own embedder, or for a client (which has none here) the default model."""
    if isinstance(memory, AsyncMemoryOS):
        memory = memory.sync
    if isinstance(memory, MemoryOS):
        return memory.embedder
    return make_embedder(DEFAULT_EMBEDDER, Settings())


def _record(item: MemoryItem) -> MemoryRecord | None:
    """The record an item holds; None for one that holds none (written by another surface)."""
    fields = item.metadata.get(RECORD)
    if not isinstance(fields, Mapping):
        return None
    try:
        return MemoryRecord.model_validate(
            {**fields, "id": item.metadata.get(ID), "content": item.text}
        )
    except PydanticError:
        return None


def _labels(scope: str | None) -> tuple[str, ...]:
    """A scope path as its labels: ``/a/b/`` and ``a/b`` are ``("a", "b")``; ``/`` is ``()``."""
    return tuple(part for part in (scope or "").split("/") if part)


def _in_scope(record: MemoryRecord, labels: Sequence[str]) -> bool:
    return mapping.path_matches(_labels(record.scope), labels)


def _children(records: Iterator[MemoryRecord] | list[MemoryRecord], labels: Sequence[str]) -> list[str]:  # fmt: skip
    """The immediate child scopes of ``labels`` that ``records`` lie in, as sorted paths."""
    depth = len(labels)
    found = {_labels(r.scope)[: depth + 1] for r in records}
    return sorted("/" + "/".join(path) for path in found if len(path) > depth)


def _matches(
    record: MemoryRecord,
    categories: Sequence[str] | None,
    metadata_filter: Mapping[str, Any] | None,
) -> bool:
    """CrewAI's filters: any of ``categories``; every ``metadata_filter`` key equal."""
    if categories and not any(c in record.categories for c in categories):
        return False
    return all(record.metadata.get(k) == v for k, v in (metadata_filter or {}).items())


def _utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC time (CrewAI's times are naive UTC)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _before(moment: datetime, cutoff: datetime) -> bool:
    return _utc(moment) < _utc(cutoff)


def _vector_key(vector: Sequence[float] | np.ndarray[Any, Any]) -> bytes:
    """A vector's identity: the digest of its float32 bytes (CrewAI hands back the floats it
    was given as Python floats; float32 to float64 and back is exact)."""
    data = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
    return hashlib.sha256(data).digest()


def _put(table: OrderedDict[bytes, V], key: bytes, value: V, size: int) -> None:
    """``table[key] = value`` as the newest entry, the oldest dropped beyond ``size``."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > size:
        table.popitem(last=False)


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
