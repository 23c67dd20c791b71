"""``MemoryOS``: the one core every surface (SDK, CLI, REST, MCP) calls.

Every public method takes the acting user (``user_id=`` or ``by=``) and checks the grants of the
cube it touches before doing anything: ``read`` to search or get, ``write`` to add, update or
delete, ``admin`` to grant or re-embed.  Input is validated completely before the first write, so
an error leaves the database as it was.  Thread-safe: a server may share one instance.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from memstrata import cube_ops, keys
from memstrata.closing import Closing
from memstrata.config import Settings
from memstrata.cube import Manifest
from memstrata.embed import Closeable, Embedder, fingerprint, make_embedder
from memstrata.embed.base import check_cube_embedder
from memstrata.errors import (
    AdminRequired,
    ConfigurationError,
    CubeNotFound,
    ItemNotFound,
    LLMError,
    LLMNotConfigured,
    NotFoundError,
    PermissionDenied,
    Unauthenticated,
    UserNotFound,
    ValidationError,
)
from memstrata.lifecycle import erase, states
from memstrata.lifecycle.history import search_as_of
from memstrata.llm import LLM, ChatMessage, Completion, OpenAIChat, make_llm, usage
from memstrata.model import (
    CUBE_KINDS,
    ITEM_TYPES,
    PERMISSIONS,
    ROLES,
    TIERS,
    ApiKey,
    Cube,
    Event,
    Grant,
    Hit,
    MemoryItem,
    ProfileAttribute,
    Source,
    User,
    Version,
    new_id,
    parse_time,
    permits,
    utcnow,
)
from memstrata.reader import documents
from memstrata.reader.messages import parse_messages
from memstrata.retrieval.filters import Filters, parse_filters
from memstrata.retrieval.pack import Context, pack
from memstrata.retrieval.prompt import ChatReply, chat_messages
from memstrata.retrieval.search import (
    embedding_text,
    expand_chain,
    expand_to_sources,
    hybrid_search,
)
from memstrata.scheduler import Scheduler, SQLiteTaskQueue, Task, TaskQueue, TaskStatus
from memstrata.store.base import Store
from memstrata.store.sqlite import SQLiteStore
from memstrata.tiers.settings import TierSettings
from memstrata.tiers.tasks import TierTasks

log = logging.getLogger("memstrata")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
_DEFAULT_EMBEDDER = "e5"
MAX_TOP_K = 1000
MAX_BUDGET = 1_000_000
MAX_AUDIT_LIMIT = 10_000
#: Seconds a cube's consolidation waits after an add, so that a burst of adds shares one task.
CONSOLIDATE_DELAY_S = 1.0
#: The values ``configure`` accepts for each runtime setting.
_RUNTIME_RANGES: dict[str, tuple[float, float]] = {
    "rrf_k": (1, 10_000),
    "search_candidates": (1, 10_000),
    "keyword_max_postings": (1, 10_000_000),
    "keyword_weight": (0.0, 100.0),
    "dense_weight": (0.0, 100.0),
}

#: Seconds between writes of read counts (segment visits).
READS_FLUSH_S = 5.0


class MemoryOS(Closing):
    """Long-term memory for agents: users, cubes, grants, add, search, get, update, history."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        *,
        queue: TaskQueue,
        owns_embedder: bool = False,
        llm: LLM | None = None,
        record_usage: Callable[[str, Completion], None] | None = None,
        llm_usage: Callable[[str], usage.LLMUsage] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self._owns_embedder = owns_embedder
        #: the chat model of the ``llm`` reader (None: the offline reader); owned and closed here
        self.llm = llm
        self._record_usage = record_usage
        self._llm_usage = llm_usage
        self.scheduler = Scheduler(queue, workers=settings.workers, lease_s=settings.task_lease_s)
        # The chat model also reads hot segments only when the llm reader is chosen.
        reader_llm = llm if settings.reader == "llm" else None
        self.tiers = TierTasks(
            store, embedder, self.scheduler, llm=reader_llm, record_usage=record_usage
        )
        self.scheduler.start()

    @classmethod
    def open(
        cls,
        path: str | None = None,
        *,
        embedder: str | Embedder | None = None,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> MemoryOS:
        """Open (creating if missing) the database at ``path``.

        ``embedder`` is a name (``e5``, ``use``, ``minilm``, ``openai``) or an ``Embedder``; when
        omitted, the embedder the file was created with is used (``e5`` for a new file).  Other
        keyword arguments override ``Settings`` fields.  Raises ``NotOurDatabase`` or
        ``SchemaTooNew`` for files it must not touch.
        """
        # An instance is told apart from a name without isinstance(…, Embedder): on Python
        # 3.11 that would evaluate ``dim``, which for a remote embedder is a request.
        given = None if embedder is None or isinstance(embedder, str) else embedder
        name = embedder if isinstance(embedder, str) else None
        base = settings or Settings.load()
        overrides = {"db": path, "embedder": name, **overrides}
        settings = Settings.from_mapping(
            {**vars(base), **{k: v for k, v in overrides.items() if v is not None}}
        )
        store = SQLiteStore(
            settings.db,
            busy_timeout_ms=settings.busy_timeout_ms,
            keyword_max_postings=settings.keyword_max_postings,
        )
        try:
            recorded = store.get_meta("embedder")
            chosen = given.name if given else settings.embedder or recorded or _DEFAULT_EMBEDDER
            instance = given or make_embedder(chosen, settings)
            if recorded is None:
                store.set_meta("embedder", chosen)
        except BaseException:
            store.close()
            raise
        settings = replace(settings, embedder=chosen)
        queue = SQLiteTaskQueue(store)
        try:
            llm = make_llm(settings)
        except BaseException:
            store.close()
            raise
        if isinstance(llm, OpenAIChat) and (problem := llm.probe()) is not None:
            # Not fatal: add and search need no model, and promotion falls back to the rules.
            log.warning("the chat model's endpoint is not available: %s", problem)
        return cls(
            store, instance, settings, queue=queue, owns_embedder=given is None, llm=llm,
            record_usage=partial(usage.record, store), llm_usage=partial(usage.usage, store),
        )  # fmt: skip

    def close(self) -> None:
        """Flush read counts, stop the workers, close the store (and the embedder ``open`` made).

        A task still running is abandoned with its lease; it runs again, in this or another
        process, once the lease has expired.
        """
        self.tiers.flush_reads(force=True)
        self.scheduler.close()
        self.store.close()
        if self.llm is not None:
            self.llm.close()
        if self._owns_embedder and isinstance(self.embedder, Closeable):
            self.embedder.close()

    # -- users, cubes, grants ----------------------------------------------------------------

    def create_user(
        self, user_id: str, name: str | None = None, role: str = "user", *, by: str | None = None
    ) -> User:
        """Create a user; ``AlreadyExists`` if the id is taken.

        ``by`` (surfaces pass the caller) must be an admin; in-process callers may omit it.
        """
        if by is not None:
            self._require_admin(by)
        _check_id(user_id, "user_id")
        if role not in ROLES:
            raise ValidationError(f"role {role!r} is not one of {', '.join(ROLES)}")
        if name is not None and not isinstance(name, str):
            raise ValidationError("name must be a string")
        user = User(user_id=user_id, name=name, role=role)  # type: ignore[arg-type]
        self.store.put_user(user)
        return user

    def get_user(self, user_id: str) -> User:
        user = self.store.get_user(user_id) if isinstance(user_id, str) else None
        if user is None:
            raise UserNotFound(str(user_id))
        return user

    def list_users(self, *, by: str | None = None) -> list[User]:
        """Every user; ``by`` (when given) must be an admin."""
        if by is not None:
            self._require_admin(by)
        return self.store.list_users()

    # -- API keys ----------------------------------------------------------------------------

    def create_key(self, user_id: str, *, by: str, label: str | None = None) -> ApiKey:
        """A new API key for ``user_id`` (``by`` is that user or an admin).

        The returned ``ApiKey.secret`` is the key itself: it is not stored and cannot be shown
        again.
        """
        self._require_self_or_admin(by, user_id)
        if label is not None and (not isinstance(label, str) or len(label) > 200):
            raise ValidationError("label must be a string of at most 200 characters")
        secret = keys.new_key()
        key = ApiKey(key_id=new_id(), user_id=user_id, label=label, secret=secret)
        self.store.put_key(key, keys.key_hash(secret))
        return key

    def list_keys(self, user_id: str, *, by: str) -> list[ApiKey]:
        """``user_id``'s keys (revoked ones too, with ``revoked_at``), without secrets."""
        self._require_self_or_admin(by, user_id)
        return self.store.list_keys(user_id)

    def revoke_key(self, user_id: str, key_id: str, *, by: str) -> None:
        """Revoke one of ``user_id``'s keys; ``KeyNotFound`` if it has no such live key."""
        self._require_self_or_admin(by, user_id)
        if not isinstance(key_id, str) or not self.store.revoke_key(user_id, key_id, by):
            raise NotFoundError(
                f"user {user_id!r} has no active key {key_id!r}", hint="list the user's keys"
            )

    def authenticate(self, key: str | None) -> User:
        """The user a live API key belongs to; ``Unauthenticated`` otherwise."""
        if not key or not isinstance(key, str):
            raise Unauthenticated(
                "an API key is required", hint="send the header 'Authorization: Bearer KEY'"
            )
        user_id = self.store.key_user(keys.key_hash(key))
        if user_id is None:
            raise Unauthenticated("the API key is unknown or revoked")
        return self.get_user(user_id)

    def bootstrap_admin(self, key: str | None = None, user_id: str = "admin") -> str | None:
        """On a database with no users, create admin ``user_id`` and return its API key.

        ``key`` (e.g. from ``MEMSTRATA_ADMIN_KEY``) is used as the key when given, else one is
        made.  Returns None, changing nothing, when users already exist; a given ``key`` is then
        still accepted if it is not yet stored (so a fixed admin key survives a restart).
        """
        if key is not None and len(key) < 16:
            raise ValidationError("the admin key must be at least 16 characters")
        if self.store.list_users():
            if key is not None and self.store.key_user(keys.key_hash(key)) is None:
                admin = next((u for u in self.store.list_users() if u.role == "admin"), None)
                if admin is not None:
                    record = ApiKey(key_id=new_id(), user_id=admin.user_id, label="admin key")
                    self.store.put_key(record, keys.key_hash(key))
            return None
        self.create_user(user_id, name="Administrator", role="admin")
        secret = key or keys.new_key()
        record = ApiKey(key_id=new_id(), user_id=user_id, label="bootstrap")
        self.store.put_key(record, keys.key_hash(secret))
        return secret

    def create_cube(
        self,
        name: str,
        *,
        owner: str,
        cube_id: str | None = None,
        kind: str = "user",
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """Create a cube owned (with ``admin``) by ``owner``; its vectors use this embedder.

        ``settings`` are the tier settings of ``memstrata.tiers.settings.TierSettings`` (the
        defaults fill what is missing); an unknown key or a value out of range is a
        ``ValidationError`` naming the allowed range.
        """
        self.get_user(owner)
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("cube name must be a non-empty string")
        if cube_id is not None:
            _check_id(cube_id, "cube_id")
        if kind not in CUBE_KINDS:
            raise ValidationError(f"cube kind {kind!r} is not one of {', '.join(CUBE_KINDS)}")
        tiers = TierSettings.parse(settings)
        cube = Cube(
            cube_id=cube_id or new_id(),
            name=name,
            owner=owner,
            kind=kind,  # type: ignore[arg-type]
            settings=tiers.as_dict(),
            embedder=fingerprint(self.embedder),
        )
        self.store.put_cube(cube)
        return cube

    def get_cube(self, cube_id: str, *, user_id: str) -> Cube:
        return self._require(user_id, cube_id, "read")

    def delete_cube(self, cube_id: str, *, user_id: str) -> int:
        """Delete a cube and all its memory for good (needs ``admin``); returns the item count.

        Items, versions, vectors, the full-text index, tasks and grants go; the cube's audit
        events stay as tombstones with their payloads blanked.
        """
        self._require(user_id, cube_id, "admin")
        return self.store.delete_cube(cube_id, user_id)

    def list_cubes(self, *, user_id: str) -> list[Cube]:
        """The cubes ``user_id`` may read (owned or shared), oldest first."""
        self.get_user(user_id)
        return self.store.list_cubes(user_id)

    def grant(self, cube_id: str, user_id: str, permission: str, *, by: str) -> Grant:
        """Give ``user_id`` ``permission`` (read, write, admin) on a cube; ``by`` needs admin."""
        if permission not in PERMISSIONS:
            raise ValidationError(
                f"permission {permission!r} is not one of {', '.join(PERMISSIONS)}"
            )
        cube = self._require(by, cube_id, "admin")
        self.get_user(user_id)
        if user_id == cube.owner and permission != "admin":
            raise ValidationError("the owner of a cube always keeps admin")
        grant = Grant(cube_id, user_id, permission, by)  # type: ignore[arg-type]
        self.store.put_grant(grant)
        return grant

    def share(self, cube_id: str, user_id: str, permission: str = "read", *, by: str) -> Grant:
        """``grant`` under MemOS's name: give ``user_id`` ``permission`` on a cube."""
        return self.grant(cube_id, user_id, permission, by=by)

    def revoke(self, cube_id: str, user_id: str, *, by: str) -> None:
        """Take away ``user_id``'s grant on a cube (``by`` needs admin); the owner keeps admin."""
        cube = self._require(by, cube_id, "admin")
        self.get_user(user_id)
        if user_id == cube.owner:
            raise ValidationError("the owner of a cube always keeps admin")
        if not self.store.delete_grant(cube_id, user_id, by):
            raise NotFoundError(f"user {user_id!r} holds no grant on cube {cube_id!r}")

    def grants(self, cube_id: str, *, by: str) -> list[Grant]:
        """Who holds what on a cube (``by`` needs admin), oldest grant first."""
        self._require(by, cube_id, "admin")
        return self.store.list_grants(cube_id)

    def audit(
        self,
        *,
        by: str,
        cube_id: str | None = None,
        item_id: str | None = None,
        since: Any = None,
        limit: int = 1000,
    ) -> list[Event]:
        """The audit trail (append-only events), oldest first.

        An administrator may read every event; a cube admin the events of that cube (give
        ``cube_id`` or ``item_id``).  Erased content is absent from the events' payloads.
        """
        user = self.get_user(by)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ValidationError(f"limit must be an integer from 1 to {MAX_AUDIT_LIMIT}")
        if not 1 <= limit <= MAX_AUDIT_LIMIT:
            raise ValidationError(f"limit must be an integer from 1 to {MAX_AUDIT_LIMIT}")
        at = None if since is None else parse_time(since, "since")
        if user.role == "admin":  # administrators read every event, grant or not
            if item_id is not None and not self.store.get_items([item_id]):
                raise ItemNotFound(item_id, cube_id)
            if cube_id is not None and self.store.get_cube(cube_id) is None:
                raise CubeNotFound(cube_id)
        elif item_id is not None:
            cube_id = self._item(item_id, by, "admin", cube_id).cube_id
        elif cube_id is not None:
            self._require(by, cube_id, "admin")
        else:
            raise AdminRequired(by)
        return self.store.events(cube_id=cube_id, item_id=item_id, since=at, limit=limit)

    def erase(
        self,
        item_id: str | None = None,
        *,
        user_id: str,
        session_id: str | None = None,
        cube_id: str | None = None,
        subject_user_id: str | None = None,
        reason: str | None = None,
    ) -> int:
        """Erase for good (GDPR): one item, a session of a cube, a whole cube, or everything
        ``subject_user_id`` said; returns how many items were erased.

        Content leaves the items, versions, full-text index, vectors, caches, task payloads and
        event payloads; tombstones (ids, times, ops) stay.  Items derived from erased ones
        (facts, segments, profile entries citing them) are erased too.  Needs ``write`` for an
        item or a session, ``admin`` for a cube; a subject's data may be erased by that user or
        an administrator (in every cube).  See ``lifecycle.erase``.
        """
        return erase.erase(
            self, user_id, item_id=item_id, session_id=session_id, cube_id=cube_id,
            subject_user_id=subject_user_id, reason=reason,
        )  # fmt: skip

    # -- items -------------------------------------------------------------------------------

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
    ) -> list[str]:
        """Store each message as a ``working``/``turn`` item; return their ids in order.

        Searchable as soon as this returns.  A message whose ``id`` is already stored in the cube
        with the same content is not stored twice (its existing id is returned); with other
        content it is a ``ConflictError``.
        """
        parsed = parse_messages(messages)
        if session_id is not None:
            _check_id(session_id, "session_id")
        cube = self._require(user_id, cube_id, "write")
        self._check_embedder(cube)
        now = utcnow()
        items = [
            MemoryItem(
                id=new_id(),
                cube_id=cube_id,
                text=m.content,
                session_id=session_id,
                user_id=user_id,
                role=m.role,
                speaker=m.name,
                metadata=m.metadata,
                external_id=m.external_id,
                event_time=m.timestamp or now,
                created_at=now,
                updated_at=now,
            )
            for m in parsed
        ]
        vectors = self.embedder.embed_passages([embedding_text(i) for i in items])
        ids = self.store.add_items(items, vectors, fingerprint(self.embedder))
        self.tiers.added(cube_id)
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
    ) -> list[str]:
        """Parse a document (.txt .md .json .pdf, as bytes) and store it as ``long``/``chunk`` items.

        Chunks follow ``chunk_size``/``chunk_overlap`` (see ``reader.documents``); each has
        ``sources = [{"uri": "document:<filename>", "span": [start, end]}]`` and metadata naming
        the document, its SHA-256 and the chunk's place.  Adding the same bytes again stores
        nothing new and returns the same ids.  Returns the chunk ids in document order.
        """
        if not isinstance(data, (bytes, bytearray)):
            raise ValidationError("a document must be given as bytes")
        if not isinstance(filename, str) or not filename.strip() or len(filename) > 255:
            raise ValidationError("filename must be a non-empty string of at most 255 characters")
        extra = parse_messages([{"content": "-", "metadata": metadata or {}}])[0].metadata
        if session_id is not None:
            _check_id(session_id, "session_id")
        text = documents.parse_document(filename, bytes(data))
        chunks = documents.chunk_text(text, self.settings.chunk_size, self.settings.chunk_overlap)
        cube = self._require(user_id, cube_id, "write")
        self._check_embedder(cube)
        digest = hashlib.sha256(data).hexdigest()
        now = utcnow()
        items = [
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
            )
            for n, chunk in enumerate(chunks)
        ]
        vectors = self.embedder.embed_passages([embedding_text(i) for i in items])
        return self.store.add_items(items, vectors, fingerprint(self.embedder))

    def search(
        self,
        query: str,
        *,
        user_id: str,
        cube_ids: Sequence[str] | None = None,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
        include: Sequence[str] | None = None,
        as_of: Any = None,
    ) -> list[Hit]:
        """Hybrid search over ``cube_ids`` (default: every cube the user may read), best first.

        Each hit's item names its cube.  ``include`` adds ``merged``, ``archived`` or ``frozen``
        items (left out by default).  With ``as_of`` (a time) the search answers as the memory
        stood then: later items are absent, updated items show the version then current (see
        ``lifecycle.history``; slower: it reads the cubes' history).
        """
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ValidationError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
        parsed = parse_filters(filters)
        if include is not None:
            statuses = (*parsed.statuses, *states.searched_statuses(include))
            parsed = replace(parsed, statuses=tuple(dict.fromkeys(statuses)))
        cubes = self._readable(user_id, cube_ids)
        if as_of is None:
            return self._search(query, cubes, top_k, parsed)
        at = self._past_time(as_of, cubes)
        for cube in cubes:
            self._check_embedder(cube)
        scope = [c.cube_id for c in cubes]
        return search_as_of(
            self.store, self.embedder, self.settings, query, scope, parsed, top_k, at
        )

    def _search(self, query: str, cubes: list[Cube], top_k: int, filters: Filters) -> list[Hit]:
        """``search`` over cubes already checked readable."""
        if not cubes:
            return []
        for cube in cubes:
            self._check_embedder(cube)
        scope = [c.cube_id for c in cubes]
        hits = hybrid_search(self.store, self.embedder, self.settings, query, scope, filters, top_k)
        self.tiers.note_reads(h.item for h in hits)
        return hits

    def context(
        self,
        query: str,
        *,
        user_id: str,
        budget_tokens: int = 1000,
        cube_ids: Sequence[str] | None = None,
        session_id: str | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        expand_sources: bool = True,
        chain: bool = True,
    ) -> Context:
        """The memories for ``query`` packed into ``budget_tokens`` (see ``retrieval.pack``).

        With ``session_id``, that session's working turns come first.  With ``expand_sources``
        a long-tier hit (fact, profile, preference, knowledge) is shown as the turns it came
        from (see ``retrieval.search.expand_to_sources``); with ``chain`` each turn brings the
        next turn of its session (``expand_chain``).  Never exceeds the budget.
        """
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise ValidationError("budget_tokens must be an integer")
        if not 1 <= budget_tokens <= MAX_BUDGET:
            raise ValidationError(f"budget_tokens must be from 1 to {MAX_BUDGET}")
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        parsed = parse_filters(filters)
        cubes = self._readable(user_id, cube_ids)
        top_k = min(MAX_TOP_K, max(20, budget_tokens // 15))
        hits = self._search(query, cubes, top_k, parsed)
        if expand_sources:
            hits = expand_to_sources(self.store, hits)
        if chain:
            hits = expand_chain(self.store, hits)
        recent: list[MemoryItem] = []
        if session_id is not None:
            working = Filters(session_id=session_id, tiers=("working",), types=("turn",))
            for cube in cubes:
                recent.extend(self.store.list_items(cube.cube_id, working))
            recent.sort(key=lambda i: (i.event_time, i.id))
        profile = [a.text for a in self._profile(cubes)]
        return pack(hits, recent, budget_tokens, profile=profile)

    def chat(
        self,
        query: str,
        *,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> ChatReply:
        """Answer ``query`` from memory with the chat model, and remember the exchange.

        The context comes from every cube ``user_id`` may read (``context``); the question and the
        answer are stored in ``cube_id`` (needs ``write``) as two turns of ``session_id``.  One LLM
        call, counted against ``cube_id``.  ``LLMNotConfigured`` without a chat model; an
        ``LLMError`` stores nothing.
        """
        llm, messages, ctx = self._chat_prompt(
            query, user_id, cube_id, session_id, budget_tokens, max_tokens
        )
        completion = llm.complete(messages, max_tokens=max_tokens)
        if self._record_usage is not None:
            self._record_usage(cube_id, completion)
        ids = self._remember_exchange(query, completion.text, user_id, cube_id, session_id)
        return ChatReply(answer=completion.text, ids=ids, context=ctx)

    def chat_stream(
        self,
        query: str,
        *,
        user_id: str,
        cube_id: str,
        session_id: str | None = None,
        budget_tokens: int = 1000,
        max_tokens: int = 256,
    ) -> Iterator[str]:
        """``chat`` as the answer's pieces, as the model writes them.

        Everything is checked before the first piece; the exchange is stored after the last one
        (a stream abandoned part-way stores nothing).  Token counts of a stream are not reported
        by every server; the call is counted with what was reported (often zero tokens).
        """
        llm, messages, _ = self._chat_prompt(
            query, user_id, cube_id, session_id, budget_tokens, max_tokens
        )

        def pieces() -> Iterator[str]:
            answer: list[str] = []
            for piece in llm.stream(messages, max_tokens=max_tokens):
                answer.append(piece)
                yield piece
            if self._record_usage is not None:
                self._record_usage(cube_id, Completion(text="".join(answer)))
            self._remember_exchange(query, "".join(answer), user_id, cube_id, session_id)

        return pieces()

    def _chat_prompt(
        self,
        query: str,
        user_id: str,
        cube_id: str,
        session_id: str | None,
        budget_tokens: int,
        max_tokens: int,
    ) -> tuple[LLM, list[ChatMessage], Context]:
        """Check everything a chat needs, then build its prompt (no model call yet)."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise ValidationError("max_tokens must be an integer")
        if not 1 <= max_tokens <= 8192:
            raise ValidationError("max_tokens must be from 1 to 8192")
        if session_id is not None:
            _check_id(session_id, "session_id")
        self._require(user_id, cube_id, "write")
        if self.llm is None:
            raise LLMNotConfigured("chat")
        ctx = self.context(
            query, user_id=user_id, budget_tokens=budget_tokens, session_id=session_id
        )
        return self.llm, chat_messages(query, ctx, utcnow()), ctx

    def _remember_exchange(
        self, query: str, answer: str, user_id: str, cube_id: str, session_id: str | None
    ) -> list[str]:
        if not answer.strip():
            raise LLMError("the chat model answered with empty text", hint="try again")
        exchange = [
            {"role": "user", "name": user_id, "content": query},
            {"role": "assistant", "name": "assistant", "content": answer},
        ]
        return self.add(exchange, user_id=user_id, cube_id=cube_id, session_id=session_id)

    def get_profile(self, *, user_id: str, cube_id: str | None = None) -> list[ProfileAttribute]:
        """The current profile attributes in ``cube_id`` (or every readable cube), with evidence.

        Attributes come from the long tier; a contradicted value (one with ``valid_to``) is not
        current and is left out, though it stays in the cube.  Sorted by subject, then key.
        """
        return self._profile(self._readable(user_id, None if cube_id is None else [cube_id]))

    def _profile(self, cubes: list[Cube]) -> list[ProfileAttribute]:
        profile = Filters(tiers=("long",), types=("profile",))
        found = [
            _attribute(item)
            for cube in cubes
            for item in self.store.list_items(cube.cube_id, profile)
            if item.valid_to is None
        ]
        return sorted(found, key=lambda a: (a.subject, a.key, a.since or a.item_id))

    def list_memories(
        self,
        cube_id: str,
        *,
        user_id: str,
        filters: Filters | Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """A page of a cube's items passing ``filters``, oldest event first (needs ``read``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TOP_K:
            raise ValidationError(f"limit must be an integer from 1 to {MAX_TOP_K}")
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < 2**31:
            raise ValidationError("offset must be an integer from 0 to 2^31 - 1")
        parsed = parse_filters(filters)
        self._require(user_id, cube_id, "read")
        return self.store.list_items(cube_id, parsed, limit=limit, offset=offset)

    def stats(self, *, user_id: str, cube_id: str | None = None) -> dict[str, Any]:
        """Per readable cube (or just ``cube_id``): items by tier and type, tasks, LLM usage."""
        result: dict[str, Any] = {}
        for cube in self._readable(user_id, None if cube_id is None else [cube_id]):
            live = Filters()
            counts = {
                f"{tier}/{kind}": n
                for tier in TIERS
                for kind in ITEM_TYPES
                if (
                    n := self.store.count_items(
                        cube.cube_id, replace(live, tiers=(tier,), types=(kind,))
                    )
                )
            }
            pending = self.scheduler.queue.tasks(
                cube_id=cube.cube_id, status="pending", limit=MAX_TOP_K
            )
            result[cube.cube_id] = {
                "name": cube.name,
                "items": counts,
                "pending_tasks": len(pending),
                "llm_usage": dict(self._llm_usage(cube.cube_id)) if self._llm_usage else {},
            }
        return result

    #: Settings an admin may change while running (``configure``): search tuning only.
    RUNTIME_SETTINGS = tuple(_RUNTIME_RANGES)

    def configure(self, *, by: str, **changes: Any) -> Settings:
        """Change runtime settings (``RUNTIME_SETTINGS``) for this process; ``by`` is an admin."""
        self._require_admin(by)
        unknown = sorted(set(changes) - set(self.RUNTIME_SETTINGS))
        if unknown:
            raise ValidationError(
                f"setting(s) {', '.join(unknown)} cannot be changed at run time",
                hint=f"runtime settings: {', '.join(self.RUNTIME_SETTINGS)}",
            )
        try:
            updated = Settings.from_mapping({**vars(self.settings), **changes})
        except ConfigurationError as exc:
            raise ValidationError(exc.message, hint=exc.hint) from exc
        for name, (low, high) in _RUNTIME_RANGES.items():
            value = getattr(updated, name)
            if not low <= value <= high:  # also refuses NaN
                raise ValidationError(f"{name} must be from {low} to {high}")
        self.settings = updated
        return updated

    def get(
        self, item_id: str, *, user_id: str, cube_id: str | None = None, as_of: Any = None
    ) -> MemoryItem:
        """The current version of an item (deleted items too, with status ``deleted``).

        With ``as_of`` (a time): the version current at that time; ``ItemNotFound`` if the item
        did not exist yet.  A time in the future or before the cube existed is a
        ``ValidationError``.
        """
        item = self._item(item_id, user_id, "read", cube_id)
        if as_of is None:
            return item
        cube = self._require(user_id, item.cube_id, "read")
        at = self._past_time(as_of, [cube])
        then = [v for v in self.store.versions(item.id) if v.at <= at]
        if not then:
            raise ItemNotFound(item_id, cube_id)
        return then[-1].item

    def transition(
        self,
        item_id: str,
        to: str,
        *,
        user_id: str,
        reason: str | None = None,
        cube_id: str | None = None,
    ) -> MemoryItem:
        """Move an item to another lifecycle state (``lifecycle.states``); needs ``write``.

        An illegal move is a ``ConflictError`` naming the legal ones; ``deleted`` is reached only
        by ``delete``/``erase``.  Writes a new version and an event with ``reason``.
        """
        item = self._item(item_id, user_id, "write", cube_id)
        target = states.check_transition(item.id, item.status, to)
        moved = replace(item, status=target)  # type: ignore[arg-type]
        return self.store.update_item(moved, None, op="transition", actor=user_id, reason=reason)

    def rollback(
        self,
        item_id: str,
        version: int,
        *,
        user_id: str,
        reason: str | None = None,
        cube_id: str | None = None,
    ) -> MemoryItem:
        """Write a new version equal to ``version`` of the item (content and state); needs
        ``write``.  History is kept: the rollback is itself a version and an event."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValidationError("version must be an integer")
        item = self._item(item_id, user_id, "write", cube_id)
        states.check_writable(item.id, item.status)
        versions = {v.version: v.item for v in self.store.versions(item.id)}
        if version not in versions:
            raise NotFoundError(
                f"item {item_id!r} has no version {version}",
                hint=f"its versions are 1 to {item.version}",
            )
        old = versions[version]
        cube = self._require(user_id, item.cube_id, "write")
        self._check_embedder(cube)
        restored = replace(item, **{name: getattr(old, name) for name in _RESTORED})
        vector = None
        if restored.text != item.text:
            vector = self.embedder.embed_passages([embedding_text(restored)])[0]
        why = reason or f"rollback to version {version}"
        return self.store.update_item(restored, vector, op="rollback", actor=user_id, reason=why)

    def update(
        self,
        item_id: str,
        *,
        user_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
        cube_id: str | None = None,
    ) -> MemoryItem:
        """Write a new version with new text and/or metadata (re-embedded); returns it."""
        if text is None and metadata is None:
            raise ValidationError("nothing to update", hint="pass text= and/or metadata=")
        changes: dict[str, Any] = {}
        if text is not None:
            changes["text"] = parse_messages(text)[0].content
        if metadata is not None:
            changes["metadata"] = parse_messages([{"content": "-", "metadata": metadata}])[
                0
            ].metadata
        item = self._item(item_id, user_id, "write", cube_id)
        states.check_writable(item.id, item.status)
        cube = self._require(user_id, item.cube_id, "write")
        self._check_embedder(cube)
        new = replace(item, **changes)
        vector = None
        if "text" in changes:
            vector = self.embedder.embed_passages([embedding_text(new)])[0]
        return self.store.update_item(new, vector, op="update", actor=user_id, reason=reason)

    def delete(
        self, item_id: str, *, user_id: str, reason: str | None = None, cube_id: str | None = None
    ) -> MemoryItem:
        """Soft-delete: status ``deleted``, out of search, history kept.  Idempotent."""
        item = self._item(item_id, user_id, "write", cube_id)
        if item.status == "deleted":
            return item
        states.check_writable(item.id, item.status)
        deleted = replace(item, status="deleted")
        return self.store.update_item(deleted, None, op="delete", actor=user_id, reason=reason)

    def history(self, item_id: str, *, user_id: str, cube_id: str | None = None) -> list[Version]:
        """Every version of an item, oldest first, with who made it, when and why."""
        item = self._item(item_id, user_id, "read", cube_id)
        return self.store.versions(item.id)

    def reembed(self, cube_id: str, *, user_id: str) -> int:
        """Re-embed every item of a cube with this MemoryOS's embedder; returns the count.

        The cure for ``EmbedderMismatch``.  Needs ``admin`` on the cube.
        """
        self._require(user_id, cube_id, "admin")
        items = list(self.store.iter_items(cube_id))
        vectors = self.embedder.embed_passages([embedding_text(i) for i in items])
        self.store.replace_vectors(
            cube_id, [i.id for i in items], vectors, fingerprint(self.embedder)
        )
        return len(items)

    # -- MemCubes ------------------------------------------------------------------------------

    def export(self, cube_id: str, path: str | os.PathLike[str], *, user_id: str) -> Manifest:
        """Write cube ``cube_id`` as a MemCube (docs/memcube.md) at ``path``: a new directory, or
        a new ``.tar.gz``.  Needs ``admin``; never overwrites (``MemCubeError``); only reads.
        """
        return cube_ops.export_cube(self, cube_id, path, user_id=user_id)

    def import_cube(
        self,
        path: str | os.PathLike[str],
        *,
        owner: str,
        cube_id: str | None = None,
        keep_ids: bool = True,
        reembed: bool = False,
    ) -> Cube:
        """Import the MemCube at ``path`` as a new cube owned (``admin``) by ``owner``; all or
        nothing.  Ids, embedders and errors: see ``memstrata.cube_ops.import_cube``.
        """
        return cube_ops.import_cube(
            self, path, owner=owner, cube_id=cube_id, keep_ids=keep_ids, reembed=reembed
        )

    # -- background work ---------------------------------------------------------------------

    def wait(self, cube_id: str | None = None, timeout: float | None = None) -> bool:
        """Block until no task is outstanding for ``cube_id`` (or at all); False on timeout.

        With ``workers=0`` the due tasks run here, in the caller's thread.
        """
        return self.scheduler.wait(cube_id, timeout)

    def tasks(
        self,
        *,
        user_id: str,
        cube_id: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """Recent background tasks (newest first) of ``cube_id``, or of every readable cube."""
        cubes = self._readable(user_id, None if cube_id is None else [cube_id])
        readable = {c.cube_id for c in cubes}
        found = self.scheduler.queue.tasks(cube_id=cube_id, status=status, limit=limit)
        return [t for t in found if t.cube_id in readable]

    def consolidate(self, cube_id: str, *, user_id: str, promote_all: bool = False) -> int:
        """Consolidate a cube now, in this thread, instead of waiting for the background task.

        Overflowing working turns move to the mid tier; with ``promote_all`` every active
        segment is also promoted whatever its heat (MemoryOS's ``force_mid_term_analysis``).
        Needs ``write``.  Returns how many findings the long tier took in.
        """
        return self.tiers.consolidate_now(self._require(user_id, cube_id, "write"), promote_all)

    # -- checks ------------------------------------------------------------------------------

    def _require(self, user_id: str, cube_id: str, needed: str) -> Cube:
        """The cube, once ``user_id`` is known to hold ``needed`` on it."""
        self.get_user(user_id)
        cube = self.store.get_cube(cube_id) if isinstance(cube_id, str) else None
        if cube is None:
            raise CubeNotFound(str(cube_id))
        if not permits(self.store.permission(cube_id, user_id), needed):
            raise PermissionDenied(user_id, cube_id, needed)
        return cube

    def _readable(self, user_id: str, cube_ids: Sequence[str] | None) -> list[Cube]:
        if cube_ids is None:
            return self.list_cubes(user_id=user_id)
        if isinstance(cube_ids, str) or not isinstance(cube_ids, (list, tuple)):
            raise ValidationError("cube_ids must be a list of cube ids")
        return [self._require(user_id, c, "read") for c in dict.fromkeys(cube_ids)]

    def _past_time(self, value: Any, cubes: Sequence[Cube]) -> datetime:
        """``value`` as a time in the past, not before the oldest of ``cubes`` existed."""
        at = parse_time(value, "as_of")
        if at > utcnow():
            raise ValidationError("as_of is in the future", hint="the memory has no future yet")
        if cubes and at < min(c.created_at for c in cubes):
            raise ValidationError(
                "as_of is before the cube existed", hint=f"cubes start at {cubes[0].created_at}"
            )
        return at

    def _require_admin(self, user_id: str) -> User:
        user = self.get_user(user_id)
        if user.role != "admin":
            raise AdminRequired(user_id)
        return user

    def _require_self_or_admin(self, by: str, user_id: str) -> None:
        if by != user_id:
            self._require_admin(by)
        self.get_user(user_id)

    def _item(self, item_id: str, user_id: str, needed: str, cube_id: str | None) -> MemoryItem:
        """The item, once ``user_id`` may ``needed`` it; unreadable items are "not found"."""
        self.get_user(user_id)
        found = self.store.get_items([item_id]) if isinstance(item_id, str) else []
        item = found[0] if found else None
        if item is None or (cube_id is not None and item.cube_id != cube_id):
            raise ItemNotFound(str(item_id), cube_id)
        held = self.store.permission(item.cube_id, user_id)
        if held is None:
            raise ItemNotFound(item_id, cube_id)  # existence must not leak across cubes
        if not permits(held, needed):
            raise PermissionDenied(user_id, item.cube_id, needed)
        return item

    def _check_embedder(self, cube: Cube) -> None:
        check_cube_embedder(cube, self.embedder)


#: What ``rollback`` copies from the old version (placement and bookkeeping stay as they are).
_RESTORED = (
    "text", "key", "keywords", "tags", "metadata", "status", "valid_from", "valid_to",
    "confidence", "pinned", "sources", "merged_into",
)  # fmt: skip


def _check_id(value: object, what: str) -> None:
    if not isinstance(value, str) or not _ID.match(value):
        raise ValidationError(
            f"{what} {value!r} is not a valid id",
            hint="use 1-128 letters, digits and _ . : @ -, starting with a letter or digit",
        )


def _attribute(item: MemoryItem) -> ProfileAttribute:
    return ProfileAttribute(
        cube_id=item.cube_id,
        subject=str(item.metadata.get("subject", "")),
        key=item.key or "",
        value=str(item.metadata.get("value", "")),
        text=item.text,
        since=item.valid_from,
        evidence=[s.item_id for s in item.sources if s.item_id],
        item_id=item.id,
    )
