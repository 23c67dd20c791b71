"""LangGraph over memstrata: ``MemstrataStore`` (a ``BaseStore``) and ``MemstrataSaver`` (a
``BaseCheckpointSaver``, in ``memstrata.integrations.checkpoints``).  Needs the ``langgraph``
extra; docs/integrations/langgraph.md has the mapping and an example.

The store's mapping (``memstrata.integrations.mapping``):

* One store is one user (``user_id=``) in one cube: ``cube_id=`` or the user's default cube.
  Every namespace lives in that cube; the namespace is item metadata (``lg.ns``, one key per
  level), so a namespace prefix is a metadata filter.
* An item ``(namespace, key)`` is one memstrata item (a turn, which the tiers read like any
  other): its identity is a digest of namespace and key (``lg.id`` in its metadata, and its
  ``external_id``); its value is JSON in its metadata (``lg.value``, within
  ``limits.MAX_METADATA_BYTES``); its text, what search ranks, is the value's ``index`` fields.
  ``put`` of a key that exists writes a new version (``update``); ``delete`` erases it (gone
  for good, with what the tiers derived from it).
* ``search`` with a ``query`` is memstrata's hybrid search (keyword + dense, fused), scoped to
  the store's cube and namespace prefix; without one, items come oldest first.  ``filter`` is
  LangGraph's (``$eq $ne $gt $gte $lt $lte`` and nested equality), applied to the values.
* ``ttl`` (minutes) is the item's ``expires_at``; with ``refresh_ttl`` a read pushes it back
  (a new version per refresh).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path

from memstrata.errors import NotFoundError
from memstrata.integrations import mapping
from memstrata.integrations.checkpoints import MemstrataSaver
from memstrata.limits import MAX_TOP_K
from memstrata.model import MemoryItem

__all__ = ["MemstrataSaver", "MemstrataStore"]

#: Metadata keys of a store item.
MARK, ID, NS, VALUE, KEY, INDEXED, TTL = (
    "lg.store", "lg.id", "lg.ns", "lg.value", "lg.key", "lg.indexed", "lg.ttl",
)  # fmt: skip
#: Items read per call while a search or a namespace listing pages through the cube.
PAGE = MAX_TOP_K


class MemstrataStore(mapping.OnBackend, BaseStore):
    """LangGraph's long-term memory store, kept by memstrata (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``
    (``mapping.Backend``); ``user_id`` the acting user (created if missing; with a client, its
    key's owner, and may be omitted); ``cube_id`` the cube (created, owned by the user, if
    missing; default: the user's default cube).  With an ``AsyncClient`` use ``abatch`` (the
    ``a…`` calls).  ``index`` is LangGraph's ``IndexConfig``: only its ``fields`` are used (default
    ``["$"]``, the whole value), since memstrata's own embedder embeds.  ``ttl`` is LangGraph's
    ``TTLConfig`` (``default_ttl``, ``refresh_on_read``).  Bad input is memstrata's
    ``ValidationError``; a cube the user may not read, ``PermissionDenied``.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        cube_id: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        self.memory = memory
        self.backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)
        self.fields: list[str] = list((index or {}).get("fields") or ["$"])
        self.ttl_config = ttl

    # -- batch -------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` as LangGraph's stores do: reads see the store as it was before the
        batch; the puts then apply, the last put of a ``(namespace, key)`` winning."""
        ops = list(ops)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` off the event loop (``mapping.Backend.offload``: an async memory's calls
        are awaited on this loop)."""
        return await self.backend.offload(self.batch, list(ops))

    # -- the operations ----------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        found = self._find(tuple(op.namespace), op.key)
        if found is None:
            return None
        if op.refresh_ttl:
            found = self._refresh(found)
        return _item(found)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        if op.query:
            found = self._ranked(op, prefix)
        else:
            matching = (i for i in self._scan(prefix) if _passes(i, op.filter))
            found = [(i, None) for i in _window(matching, op.offset, op.limit)]
        if op.refresh_ttl:
            found = [(self._refresh(i), score) for i, score in found]
        return [_search_item(i, score) for i, score in found]

    def _ranked(
        self, op: SearchOp, prefix: tuple[str, ...]
    ) -> list[tuple[MemoryItem, float | None]]:
        """Indexed items by memstrata's hybrid search, then (as LangGraph's stores do) the
        unindexed ones, unranked, to fill the page."""
        want = op.offset + op.limit
        top_k = MAX_TOP_K if op.filter else max(1, min(MAX_TOP_K, want))
        metadata = {MARK: True, INDEXED: True, **mapping.path_filter(NS, prefix)}
        hits = self.backend.search(
            op.query or "", cube_ids=[self.cube_id], top_k=top_k, filters={"metadata": metadata}
        )
        ranked = [
            (h.item, h.score)
            for h in hits
            if _in_prefix(h.item, prefix) and _passes(h.item, op.filter)
        ]
        page: list[tuple[MemoryItem, float | None]] = list(ranked[op.offset : want])
        if len(page) < op.limit:
            plain = (i for i in self._scan(prefix, {INDEXED: False}) if _passes(i, op.filter))
            page.extend((i, None) for i in _window(plain, 0, op.limit - len(page)))
        return page

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces: set[tuple[str, ...]] = set()
        for item in self._scan(()):
            ns = mapping.path_of(NS, item.metadata) or ()
            if all(_does_match(c, ns) for c in op.match_conditions or ()):
                spaces.add(ns if op.max_depth is None else ns[: op.max_depth])
        return sorted(spaces)[op.offset : op.offset + op.limit]

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        if op.value is None:
            existing = self._find(namespace, op.key)
            if existing is not None:
                self.backend.erase(
                    existing.id, cube_id=self.cube_id, reason="LangGraph store delete"
                )
            return
        self._write(namespace, op)

    def _write(self, namespace: tuple[str, ...], op: PutOp) -> None:
        value = dict(op.value or {})
        text = self._text(value, op.index)
        ttl = op.ttl if isinstance(op.ttl, (int, float)) else None
        identity = mapping.digest(*namespace, "\x00", op.key)
        metadata = {
            MARK: True, ID: identity, KEY: op.key, VALUE: value, INDEXED: text is not None,
            TTL: ttl, **mapping.path_metadata(NS, namespace),
        }  # fmt: skip
        expires: Any = _expiry(ttl) if ttl is not None else "never"
        content = text if text is not None else f"{'/'.join(namespace)}/{op.key}"
        existing = self._find(namespace, op.key)
        if existing is None:
            message = {"content": content, "id": f"lg:{identity}", "metadata": metadata}
            ids = self.backend.add(
                [message], cube_id=self.cube_id, expires_at=None if ttl is None else expires
            )
            try:
                stored = self.backend.get(ids[0], cube_id=self.cube_id)
            except NotFoundError:
                return  # stored with a TTL already past: gone at once, as it should be
            if stored.metadata == metadata:
                return
            existing = stored  # the same text was stored before, by another writer: update it
        self.backend.update(
            existing.id, cube_id=self.cube_id, text=content, metadata=metadata,
            expires_at=expires,
        )  # fmt: skip

    # -- reading the cube --------------------------------------------------------------------

    def _find(self, namespace: tuple[str, ...], key: str) -> MemoryItem | None:
        identity = mapping.digest(*namespace, "\x00", key)
        page = self.backend.list_memories(
            self.cube_id, filters={"metadata": {MARK: True, ID: identity}}, limit=1
        )
        return page[0] if page else None

    def _scan(
        self, prefix: tuple[str, ...], extra: Mapping[str, Any] | None = None
    ) -> Iterator[MemoryItem]:
        """The store's items under ``prefix``, oldest first, a page of ``PAGE`` at a time."""
        metadata = {MARK: True, **(extra or {}), **mapping.path_filter(NS, prefix)}
        offset = 0
        while True:
            page = self.backend.list_memories(
                self.cube_id, filters={"metadata": metadata}, limit=PAGE, offset=offset
            )
            yield from (i for i in page if _in_prefix(i, prefix))
            if len(page) < PAGE:
                return
            offset += PAGE

    def _refresh(self, item: MemoryItem) -> MemoryItem:
        """``item`` with its expiry pushed back by its TTL, when it has one."""
        ttl = item.metadata.get(TTL)
        if not isinstance(ttl, (int, float)) or isinstance(ttl, bool):
            return item
        return self.backend.update(item.id, cube_id=self.cube_id, expires_at=_expiry(ttl))

    def _text(self, value: dict[str, Any], index: Any) -> str | None:
        """What search ranks: the value's texts at the ``index`` fields, one per line; None
        when the item is not indexed (``index=False``, or no text at the fields)."""
        if index is False:
            return None
        fields = self.fields if index is None else list(index)
        texts = [t for f in fields for t in get_text_at_path(value, f) if t.strip()]
        return "\n".join(texts) if texts else None


def _item(item: MemoryItem) -> Item:
    value, key, namespace = _parts(item)
    return Item(
        value=value, key=key, namespace=namespace, created_at=item.created_at,
        updated_at=item.updated_at,
    )  # fmt: skip


def _search_item(item: MemoryItem, score: float | None) -> SearchItem:
    value, key, namespace = _parts(item)
    return SearchItem(
        namespace=namespace, key=key, value=value, created_at=item.created_at,
        updated_at=item.updated_at, score=score,
    )  # fmt: skip


def _parts(item: MemoryItem) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    value = item.metadata.get(VALUE)
    return (
        dict(value) if isinstance(value, dict) else {},
        str(item.metadata.get(KEY, "")),
        mapping.path_of(NS, item.metadata) or (),
    )


def _in_prefix(item: MemoryItem, prefix: tuple[str, ...]) -> bool:
    ns = mapping.path_of(NS, item.metadata)
    return ns is not None and mapping.path_matches(ns, prefix)


def _window(items: Iterable[MemoryItem], offset: int, limit: int) -> list[MemoryItem]:
    out: list[MemoryItem] = []
    for n, item in enumerate(items):
        if n >= offset + limit:
            break
        if n >= offset:
            out.append(item)
    return out


def _expiry(minutes: float) -> datetime:
    return datetime.now(timezone.utc) + timedelta(minutes=minutes)


# -- LangGraph's filter and namespace rules (as its reference store reads them) ---------------


def _passes(item: MemoryItem, conditions: Mapping[str, Any] | None) -> bool:
    if not conditions:
        return True
    value = _parts(item)[0]
    return all(_compare(value.get(k), wanted) for k, wanted in conditions.items())


def _compare(actual: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: a dict with ``$`` operators, a nested dict compared
    key by key, a list element by element, anything else by ``==``."""
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(actual, op, v) for op, v in wanted.items())
        return isinstance(actual, dict) and all(
            _compare(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _operator(actual: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return bool(actual == wanted)
    if op == "$ne":
        return bool(actual != wanted)
    if op not in _ORDER:
        raise ValueError(f"Unsupported operator: {op}")
    try:
        return bool(_ORDER[op](float(actual), float(wanted)))
    except (TypeError, ValueError):
        return False  # a missing or non-numeric value is not in any range


def _does_match(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    if condition.match_type == "suffix":
        ns, path = ns[len(ns) - len(path) :], path
    else:
        ns = ns[: len(path)]
    pairs = zip(ns, path, strict=True)
    return all(p == "*" or n == p for n, p in pairs)
