"""Writing and reading single memories: add, documents, get, update, delete, history, re-embed.

``MemoryOS`` delegates here.  Every call checks the acting user's grant first (``Access``) and
validates all of its input before the first write, so an error leaves the database as it was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from memstrata.embed import fingerprint
from memstrata.errors import ConflictError, ItemNotFound, ValidationError
from memstrata.filters import Filters, parse_filters
from memstrata.lifecycle import states
from memstrata.limits import (
    HEAVY_ADD_CHARS,
    MAX_DOCUMENT_BYTES,
    MAX_FILENAME,
    MAX_HEAVY_CALLS,
    MAX_OFFSET,
    MAX_TOP_K,
    check_text,
)
from memstrata.memory import expiry, structured
from memstrata.memory.access import check_id, check_int, check_reason
from memstrata.memory.components import Components
from memstrata.memory.embedding import embed_items
from memstrata.memory.fairness import HeavyCalls
from memstrata.model import (
    DERIVED_TYPES,
    STATUSES,
    Cube,
    MemoryItem,
    Source,
    Version,
    new_id,
    utcnow,
)
from memstrata.reader import documents
from memstrata.reader.messages import parse_content, parse_messages, parse_metadata
from memstrata.reader.parts import parse_tools
from memstrata.text import embedding_text

#: Tries of an update whose item another writer changed between its read and its write.
UPDATE_ATTEMPTS = 3


class Items:
    """``MemoryOS``'s calls on items (see the module docs)."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts
        self._store = parts.store
        self._access = parts.access
        #: document uploads and large adds running now, per user (``memory.fairness``)
        self.heavy = HeavyCalls(MAX_HEAVY_CALLS)

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
        expires_at: Any = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[str]:
        """Store each message as a ``working``/``turn`` item; return their ids in order.

        OpenAI-format tool calls and results, ``tools`` definitions, images and files are
        stored as what they are (``memory.structured``: then the ids are of every item written).

        A ``user`` message without a ``name`` is spoken by the acting user: its speaker is
        their display name (else their id).  Searchable as soon as this returns.  A message
        whose ``id`` is already stored in the cube with the same content is not stored twice
        (its existing id is returned); with other content it is a ``ConflictError``.  Each turn expires (``memory.expiry``) at its
        message's ``expires_at``, else at this call's, else after the cube's ``ttl_days_turn``;
        never when none is given.  An add of more than ``HEAVY_ADD_CHARS`` characters is a heavy
        call: ``Busy`` when the user already runs ``MAX_HEAVY_CALLS`` (``memory.fairness``).
        """
        parsed = parse_messages(messages)
        specs = parse_tools(tools)
        if session_id is not None:
            check_id(session_id, "session_id")
        given = expiry.parse_expiry(expires_at)
        cube = self._access.writable_cube(user_id, cube_id)
        now = utcnow()
        default = given or expiry.default_expiry(cube, "turn", now)
        # A user's message that names no speaker was said by the user adding it: named, it is
        # theirs to every reader (the profile's subject, a question naming them, a context line).
        # (Read only when such a message is there: the grant check has read the user already.)
        author = None
        if any(m.role == "user" and not m.name for m in parsed):
            who = self._access.user(user_id)
            author = who.name or who.user_id
        items = [
            MemoryItem(
                id=new_id(),
                cube_id=cube_id,
                text=m.content,
                session_id=session_id,
                user_id=user_id,
                role=m.role,
                speaker=m.name or (author if m.role == "user" else None),
                metadata=m.metadata,
                external_id=m.external_id,
                event_time=m.timestamp or now,
                created_at=now,
                updated_at=now,
                expires_at=m.expires_at or default,
            )
            for m in parsed
        ]

        def write() -> list[str]:
            if not specs and not any(m.structured for m in parsed):
                return self._store_new(items)
            chunks, store_new = self.chunk_items, self._store_new
            return structured.add(self._store, cube, given, parsed, items, specs, chunks, store_new)

        if structured.weight(parsed) > HEAVY_ADD_CHARS:
            with self.heavy.slot(user_id, "this add"):
                ids = write()
        else:
            ids = write()
        self._parts.tiers.added(cube_id)
        return ids

    def add_document(
        self,
        data: bytes,
        *,
        filename: str,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        expires_at: Any = None,
    ) -> list[str]:
        """Parse a document (.txt .md .json .pdf, as bytes) and store it as ``long``/``chunk`` items.

        Chunks follow ``chunk_size``/``chunk_overlap`` (see ``reader.documents``); each has
        ``sources = [{"uri": "document:<filename>", "span": [start, end]}]`` and metadata naming
        the document, its SHA-256 and the chunk's place.  Adding the same bytes again stores
        nothing new and returns the same ids.  Returns the chunk ids in document order.  The
        chunks expire at ``expires_at``, else after the cube's ``ttl_days_chunk`` (never when
        neither is given; ``memory.expiry``).  An upload is a heavy call: ``Busy`` when the user
        already runs ``MAX_HEAVY_CALLS`` (``memory.fairness``); the grant is checked before it is
        read, and reading it is bounded (``reader.documents``).
        """
        if not isinstance(data, (bytes, bytearray)):
            raise ValidationError("a document must be given as bytes")
        if len(data) > MAX_DOCUMENT_BYTES:
            raise ValidationError(
                f"the document has {len(data)} bytes; at most {MAX_DOCUMENT_BYTES} are allowed",
                hint="split it into several documents",
            )
        if not isinstance(filename, str) or not filename.strip():
            raise ValidationError("filename must be a non-empty string")
        check_text(filename, "filename", MAX_FILENAME, line=True)
        extra = parse_metadata(metadata, "metadata")
        if session_id is not None:
            check_id(session_id, "session_id")
        given = expiry.parse_expiry(expires_at)
        cube = self._access.writable_cube(user_id, cube_id)
        with self.heavy.slot(user_id, "this upload"):
            return self._add_chunks(bytes(data), filename, user_id, cube, session_id, extra, given)

    def _add_chunks(
        self,
        data: bytes,
        filename: str,
        user_id: str,
        cube: Cube,
        session_id: str | None,
        extra: dict[str, Any],
        given: datetime | None,
    ) -> list[str]:
        """``add_document`` once its input is checked: parse, chunk, embed and store."""
        text = documents.parse_document(filename, data)
        chunks = self.chunk_items(text, data, filename, user_id, cube, session_id, extra, given)
        return self._store_new(chunks)

    def chunk_items(
        self,
        text: str,
        data: bytes,
        filename: str,
        user_id: str,
        cube: Cube,
        session_id: str | None,
        extra: dict[str, Any],
        given: datetime | None,
    ) -> list[MemoryItem]:
        """The ``chunk`` items of a parsed document (``text``, read from ``data``), unwritten:
        for ``add_document`` and a message's file part (``memory.structured``)."""
        settings = self._parts.settings
        cube_id = cube.cube_id
        chunks = documents.chunk_text(text, settings.chunk_size, settings.chunk_overlap)
        digest = hashlib.sha256(data).hexdigest()
        now = utcnow()
        until = given or expiry.default_expiry(cube, "chunk", now)
        return [
            MemoryItem(
                id=new_id(),
                cube_id=cube_id,
                tier="long",
                type="chunk",
                status="activated",
                text=chunk.text,
                key=filename,
                session_id=session_id,
                user_id=user_id,
                metadata={
                    **extra,
                    "document": filename,
                    "sha256": digest,
                    "chunk": n,
                    "chunks": len(chunks),
                },
                external_id=f"doc:{digest[:32]}:{n}",
                sources=[Source(uri=f"document:{filename}", span=(chunk.start, chunk.end))],
                event_time=now,
                created_at=now,
                updated_at=now,
                expires_at=until,
            )
            for n, chunk in enumerate(chunks)
        ]

    def _store_new(self, items: list[MemoryItem]) -> list[str]:
        embedder = self._parts.embedder
        vectors = embedder.embed_passages([embedding_text(i) for i in items])
        ids = self._store.add_items(items, vectors, fingerprint(embedder))
        for cube_id in dict.fromkeys(i.cube_id for i in items):
            self._parts.index.added(cube_id)
        return ids

    def list_memories(
        self,
        cube_id: str,
        *,
        user_id: str,
        filters: Filters | Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """A page of a cube's items passing ``filters``, oldest event first (needs ``read``).

        Expired items are left out (``memory.expiry``): until the sweep erases them a page may
        hold fewer than ``limit`` items."""
        check_int(limit, "limit", 1, MAX_TOP_K)
        check_int(offset, "offset", 0, MAX_OFFSET)
        parsed = parse_filters(filters)
        self._access.cube(user_id, cube_id, "read")
        page = self._store.list_items(cube_id, parsed, limit=limit, offset=offset)
        return expiry.visible(self._store, page)

    def get(
        self, item_id: str, *, user_id: str, cube_id: str | None = None, as_of: Any = None
    ) -> MemoryItem:
        """The current version of an item (deleted items too, with status ``deleted``).

        With ``as_of`` (a time): the version current at that time; ``ItemNotFound`` if the item
        did not exist yet.  A time in the future or before the cube existed is a
        ``ValidationError``.  An expired item (``memory.expiry``) is ``ItemNotFound``, whatever
        ``as_of``.
        """
        item = self._readable(item_id, user_id, cube_id)
        if as_of is None:
            return item
        cube = self._access.cube(user_id, item.cube_id, "read")
        at = self._access.past_time(as_of, [cube])
        then = [v for v in self._store.versions(item.cube_id, item.id) if v.at <= at]
        if not then:
            raise ItemNotFound(item_id, cube_id)
        return then[-1].item

    def cited_by(
        self, item_id: str, *, user_id: str, cube_id: str | None = None
    ) -> list[MemoryItem]:
        """The items of the item's cube that cite it in their ``sources`` (facts, profile
        entries, segments made from it), oldest event first, whatever their status (needs
        ``read``).  Reads the cube's derived items: meant for one item at a time."""
        item = self._readable(item_id, user_id, cube_id)
        derived = self._store.list_items(
            item.cube_id, Filters(types=DERIVED_TYPES, statuses=STATUSES)
        )
        return [d for d in derived if any(s.item_id == item.id for s in d.sources)]

    def _readable(self, item_id: str, user_id: str, cube_id: str | None) -> MemoryItem:
        """The item, once ``user_id`` may read it and it has not expired (else not found)."""
        return expiry.check_live(self._store, self._access.item(item_id, user_id, "read", cube_id))

    def update(
        self,
        item_id: str,
        *,
        user_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
        cube_id: str | None = None,
        expires_at: Any = None,
    ) -> MemoryItem:
        """Write a new version with new text (re-embedded), metadata and/or expiry; returns it.

        ``expires_at``: a time (ISO 8601, epoch seconds or a datetime; a past one makes the item
        gone at once), ``"never"`` to remove its expiry, None to leave it.  An expired item is
        ``ItemNotFound`` (``memory.expiry``)."""
        changes: dict[str, Any] = {}
        if text is not None:
            changes["text"] = parse_content(text, "text")
        if metadata is not None:
            changes["metadata"] = parse_metadata(metadata, "metadata")
        change_expiry, until = expiry.update_value(expires_at)
        if change_expiry:
            changes["expires_at"] = until
        if not changes:
            raise ValidationError(
                "nothing to update", hint="pass text=, metadata= and/or expires_at="
            )
        check_reason(reason)
        # The caller names no version, so a background write landing between this read and
        # the write (the tiers moving the turn, a visit count) is no conflict of theirs: read
        # again and apply the same change (seen in the soak as a 409 on a plain update).
        attempt = 1
        while True:
            item = expiry.check_live(
                self._store, self._access.item(item_id, user_id, "write", cube_id)
            )
            states.check_writable(item.id, item.status)
            self._access.check_item_embedder(item)
            try:
                return self.write_version(item, replace(item, **changes), user_id, "update", reason)
            except ConflictError:
                if attempt == UPDATE_ATTEMPTS:
                    raise
                attempt += 1

    def write_version(
        self, old: MemoryItem, new: MemoryItem, actor: str, op: str, reason: str | None
    ) -> MemoryItem:
        """Store ``new`` as the next version of ``old`` (checked writable by the caller),
        re-embedding it when its text changed; returns the stored item."""
        vector = None
        if new.text != old.text:
            vector = self._parts.embedder.embed_passages([embedding_text(new)])[0]
        return self._store.update_item(new, vector, op=op, actor=actor, reason=reason)

    def delete(
        self, item_id: str, *, user_id: str, reason: str | None = None, cube_id: str | None = None
    ) -> MemoryItem:
        """Soft-delete: status ``deleted``, out of search, history kept.  Idempotent."""
        check_reason(reason)
        item = self._access.item(item_id, user_id, "write", cube_id)
        if item.status == "deleted":
            return item
        states.check_writable(item.id, item.status)
        deleted = replace(item, status="deleted")
        return self._store.update_item(deleted, None, op="delete", actor=user_id, reason=reason)

    def history(self, item_id: str, *, user_id: str, cube_id: str | None = None) -> list[Version]:
        """Every version of an item, oldest first, with who made it, when and why (none for an
        expired item: ``ItemNotFound``)."""
        item = self._readable(item_id, user_id, cube_id)
        return self._store.versions(item.cube_id, item.id)

    def reembed(
        self,
        cube_id: str,
        *,
        user_id: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Re-embed every item of a cube with this MemoryOS's embedder, in this thread; returns
        the count.  The cure for ``EmbedderMismatch``.  Needs ``admin`` on the cube.
        ``progress(n, total)`` hears of the items as they are embedded (``memory.embedding``).
        """
        self._access.cube(user_id, cube_id, "admin")
        embedder = self._parts.embedder
        items = list(self._store.iter_items(cube_id))
        vectors = embed_items(embedder, items, progress)
        self._store.replace_vectors(cube_id, [i.id for i in items], vectors, fingerprint(embedder))
        return len(items)
