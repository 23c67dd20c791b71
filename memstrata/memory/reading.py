"""Reading memory: search (live and as of a past time), packed context, profile, preferences,
recall.

``MemoryOS`` delegates here.  Every call is scoped to the cubes the acting user may read
(``Access.readable``); the ranking itself is ``memstrata.retrieval``'s, the same for the live
memory and for a past moment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memstrata.filters import Filters, parse_filters
from memstrata.limits import MAX_BUDGET, MAX_ID_CHARS, MAX_TOP_K, check_text
from memstrata.memory import expiry, kinds, shaping
from memstrata.memory.access import check_int, check_query
from memstrata.memory.components import Components
from memstrata.model import Cube, Hit, ItemType, MemoryItem, Preference, ProfileAttribute
from memstrata.retrieval.history import search_as_of
from memstrata.retrieval.pack import Context, pack
from memstrata.retrieval.question import subjects
from memstrata.retrieval.search import expand_chain, expand_to_sources, hybrid_search
from memstrata.retrieval.stages import CLOCK

#: A context searches one candidate per this many tokens of budget (at least 20); more than
#: fit, since a fact and its turn collapse into one and the chain adds turns.
CONTEXT_TOKENS_PER_HIT = 15


class Reading:
    """``MemoryOS``'s read calls (see the module docs)."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts
        self._store = parts.store
        self._access = parts.access

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
        items (left out by default) and names the kinds of memory searched (``text``, the
        default; ``tool``, ``skill``: ``memory.kinds``).  With ``as_of`` (a time) the search answers as the memory
        stood then: later items are absent, updated items show the version then current, ranked
        by the same engine as the live search (``retrieval.history``; slower: it reads the
        cubes' history).
        """
        check_query(query)
        check_int(top_k, "top_k", 1, MAX_TOP_K)
        parsed = kinds.scope(parse_filters(filters), include)
        cubes = self._access.readable(user_id, cube_ids)
        if as_of is None:
            return self._search(query, cubes, top_k, parsed)
        at = self._access.past_time(as_of, cubes)
        for cube in cubes:
            self._access.check_embedder(cube)
        scope = [c.cube_id for c in cubes]
        parts = self._parts
        return expiry.search(self._store, scope, top_k, lambda k: search_as_of(
            self._store, parts.embedder, parts.search_settings(), query, scope, parsed, k, at
        ))  # fmt: skip

    def _search(self, query: str, cubes: list[Cube], top_k: int, filters: Filters) -> list[Hit]:
        """``search`` over cubes already checked readable; counts the hits' reads."""
        settings = self._parts.search_settings()
        if not cubes:
            return []
        for cube in cubes:
            self._access.check_embedder(cube)
        scope = [c.cube_id for c in cubes]
        parts = self._parts
        hits = expiry.search(self._store, scope, top_k, lambda k: hybrid_search(
            self._store, parts.embedder, settings, query, scope, filters, k
        ))  # fmt: skip
        parts.tiers.note_reads(h.item for h in hits)
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

        With ``session_id`` (one line of at most ``MAX_ID_CHARS``), that session's working turns
        come first.  With ``expand_sources`` a long-tier hit (fact, profile, preference,
        knowledge) is shown as the turns it came from (see ``retrieval.search.expand_to_sources``);
        with ``chain`` each turn brings the next turn of its session (``expand_chain``).  Never
        exceeds the budget.
        """
        check_int(budget_tokens, "budget_tokens", 1, MAX_BUDGET)
        check_query(query)
        if session_id is not None:
            check_text(session_id, "session_id", MAX_ID_CHARS, line=True)
        parsed = parse_filters(filters)
        cubes = self._access.readable(user_id, cube_ids)
        top_k = min(MAX_TOP_K, max(20, budget_tokens // CONTEXT_TOKENS_PER_HIT))
        hits = self._search(query, cubes, top_k, parsed)
        if expand_sources:
            hits = expand_to_sources(self._store, hits)
        if chain:
            scope = [c.cube_id for c in cubes]
            hits = expand_chain(self._store, hits, subjects(self._store, query, scope))
        recent: list[MemoryItem] = []
        if session_id is not None:
            working = Filters(session_id=session_id, tiers=("working",), types=("turn",))
            for cube in cubes:
                recent.extend(self._store.list_items(cube.cube_id, working))
            recent.sort(key=lambda i: (i.event_time, i.id))
        hits, recent = expiry.visible_hits(self._store, hits), expiry.visible(self._store, recent)
        profile = [a.text for a in self._profile(cubes)]
        with CLOCK.timed("pack"):
            return pack(hits, recent, budget_tokens, profile=profile)

    def recall(
        self, query: str, *, user_id: str, cube_id: str, budget_tokens: int = 1000
    ) -> shaping.Recall:
        """What MemoryOS's retriever returns for ``query`` in ``cube_id``: the packed context
        split into pages, user knowledge and assistant knowledge, with the cube's working turns
        (at most ``MAX_TOP_K``, the newest) and ``user_id``'s profile summary
        (``memory.shaping``)."""
        ctx = self.context(
            query, user_id=user_id, cube_ids=[cube_id], budget_tokens=budget_tokens,
            expand_sources=False,  # MemoryOS returns pages and knowledge apart
        )  # fmt: skip
        turns = Filters(tiers=("working",), types=("turn",))
        working = self._store.list_items(cube_id, turns, descending=True, limit=MAX_TOP_K)
        working = expiry.visible(self._store, working)
        summary = self.profile_summary(user_id=user_id, cube_id=cube_id)
        return shaping.recall(ctx, working[::-1], summary)

    def get_profile(self, *, user_id: str, cube_id: str | None = None) -> list[ProfileAttribute]:
        """The current profile attributes in ``cube_id`` (or every readable cube), with evidence.

        Attributes come from the long tier; a contradicted value (one with ``valid_to``) is not
        current and is left out, though it stays in the cube.  Sorted by subject, then key.
        """
        return self._profile(self._access.readable(user_id, None if cube_id is None else [cube_id]))

    def get_preferences(self, *, user_id: str, cube_id: str | None = None) -> list[Preference]:
        """The current preferences in ``cube_id`` (or every readable cube), with evidence.

        Preferences come from the long tier (``preference`` items, explicit and implicit); one
        contradicted by its opposite (``valid_to`` set) is not current and is left out, though it
        stays in the cube.  Sorted by subject, then key.  ``PermissionDenied`` for a cube the
        user may not read, ``CubeNotFound`` for an unknown one.
        """
        cubes = self._access.readable(user_id, None if cube_id is None else [cube_id])
        return sorted(
            (_preference(item) for item in self._current(cubes, "preference")),
            key=lambda p: (p.subject, p.key, p.since or p.item_id),
        )

    def profile_summary(self, *, user_id: str, cube_id: str | None = None) -> str:
        """``user_id``'s own current attributes, one ``key: value`` line each ("" if none)."""
        return shaping.profile_summary(user_id, self.get_profile(user_id=user_id, cube_id=cube_id))

    def _profile(self, cubes: list[Cube]) -> list[ProfileAttribute]:
        found = [_attribute(item) for item in self._current(cubes, "profile")]
        return sorted(found, key=lambda a: (a.subject, a.key, a.since or a.item_id))

    def _current(self, cubes: list[Cube], kind: ItemType) -> list[MemoryItem]:
        """The long-tier items of type ``kind`` in ``cubes`` that still hold (no ``valid_to``)."""
        wanted = Filters(tiers=("long",), types=(kind,))
        return expiry.visible(self._store, [
            item
            for cube in cubes
            for item in self._store.list_items(cube.cube_id, wanted)
            if item.valid_to is None
        ])  # fmt: skip


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


def _preference(item: MemoryItem) -> Preference:
    return Preference(
        cube_id=item.cube_id,
        subject=str(item.metadata.get("subject", "")),
        key=item.key or "",
        polarity=_polarity(item.metadata.get("polarity")),
        explicit=item.metadata.get("explicit") is not False,
        text=item.text,
        since=item.valid_from,
        evidence=[s.item_id for s in item.sources if s.item_id],
        item_id=item.id,
    )


def _polarity(value: object) -> int:
    """1 or -1 as the reader stored it; 0 for anything else (metadata is the caller's to edit)."""
    return value if type(value) is int and value in (1, -1) else 0
