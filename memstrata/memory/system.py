"""``MemoryOS``: the one core every surface (SDK, CLI, REST, MCP) calls.

Every public method takes the acting user (``user_id=`` or ``by=``) and checks the grants of the
cube it touches before doing anything: ``read`` to search or get, ``write`` to add, update or
delete, ``admin`` to grant or re-embed.  Input is validated completely before the first write, so
an error leaves the database as it was.  Thread-safe: a server may share one instance.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from memstrata.closing import Closing
from memstrata.config import Settings
from memstrata.embed import Closeable, Embedder, fingerprint, make_embedder
from memstrata.errors import (
    ItemNotFound,
    LLMError,
    LLMNotConfigured,
    ValidationError,
)
from memstrata.filters import Filters, parse_filters
from memstrata.lifecycle import states
from memstrata.llm import LLM, ChatMessage, Completion, OpenAIChat, make_llm
from memstrata.memory.access import MAX_TOP_K, check_id
from memstrata.memory.governance import MAX_AUDIT_LIMIT, Governance
from memstrata.memory.principals import Principals
from memstrata.model import (
    Cube,
    Hit,
    MemoryItem,
    ProfileAttribute,
    Source,
    Version,
    new_id,
    utcnow,
)
from memstrata.reader import documents
from memstrata.reader.messages import parse_messages
from memstrata.retrieval.history import search_as_of
from memstrata.retrieval.pack import Context, pack
from memstrata.retrieval.prompt import ChatReply, chat_messages
from memstrata.retrieval.search import (
    expand_chain,
    expand_to_sources,
    hybrid_search,
)
from memstrata.scheduler import Scheduler, Task, TaskQueue, TaskStatus
from memstrata.store.base import Store
from memstrata.store.sqlite import SQLiteStore, SQLiteTaskQueue, usage
from memstrata.text import embedding_text
from memstrata.tiers.tasks import TierTasks

__all__ = ["MAX_AUDIT_LIMIT", "MAX_BUDGET", "MAX_TOP_K", "MemoryOS"]

log = logging.getLogger("memstrata")
_DEFAULT_EMBEDDER = "e5"
MAX_BUDGET = 1_000_000


class MemoryOS(Principals, Governance, Closing):
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
        #: the chat model (chat, and the ``llm`` reader when chosen); None without one; closed here
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
            check_id(session_id, "session_id")
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
            check_id(session_id, "session_id")
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
            check_id(session_id, "session_id")
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
