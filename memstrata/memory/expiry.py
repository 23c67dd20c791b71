"""Expiry apart from decay (docs/lifecycle.md, "Expiry"): an item whose ``expires_at`` has
passed is gone.

A hard rule, not a ranking penalty (heat and recency stay soft):

* **Reads** leave it out: search (live and ``as_of``), context, profile, preferences, recall and
  listings drop it (``visible``, ``visible_hits``, ``search``); ``get``, ``history``, ``update``
  and the other calls on one item answer ``ItemNotFound`` (``check_live``).  An item whose
  *source* expired (a fact read from an expired turn, a segment holding an expired page) is
  gone with it: it says what the source said.
* **Erasure** follows: the ``expire`` task (``ExpiryTasks``) erases a cube's expired items for
  good, with every item derived from them, through the erasure path (``memory.erase``:
  ``Store.erase_items``, then the cube's KV caches and adapters are deleted, to be rebuilt
  without them), each an ``erase`` event by ``EXPIRY_ACTOR``.  A worker process looks for due
  items every ``expiry_sweep_s`` seconds and queues one task per cube that has some;
  ``MemoryOS.expire`` does the same on demand, in the caller's thread.

Where ``expires_at`` comes from: ``add`` (per message or per call), ``add_document``, a cube's
``ttl_days_turn`` / ``ttl_days_chunk`` (counted from when the item is stored), or ``update``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from memstrata.errors import ItemNotFound, ValidationError
from memstrata.limits import MAX_TOP_K
from memstrata.memory import erase
from memstrata.memory.components import Components
from memstrata.model import Cube, Hit, MemoryItem, parse_time, utcnow
from memstrata.scheduler import Scheduler, Task
from memstrata.store.base import ErasureScope, ErasureStore
from memstrata.tiers.settings import TierSettings

log = logging.getLogger("memstrata")

#: Who the audit names for an erasure by expiry (not a user id: ids cannot hold parentheses).
EXPIRY_ACTOR = "(expiry)"
#: Expired items one ``expire`` task erases; a cube with more queues a follow-up task.
EXPIRY_BATCH = 500
#: Most expired-but-not-yet-erased ids a read looks up to hide their derived items and to
#: search deeper for the hits they take; past it (the sweep far behind) a search may return
#: fewer than ``top_k`` hits, never an expired one.
HIDDEN_LOOKUP = MAX_TOP_K
#: What ``update(expires_at=...)`` takes to remove an item's expiry.
NEVER = "never"


def parse_expiry(value: object, what: str = "expires_at") -> datetime | None:
    """``value`` (a time: ISO 8601, epoch seconds or a datetime; or None) as a UTC datetime.

    A time in the past is allowed: the item is gone at once (and erased by the next sweep)."""
    return None if value is None else parse_time(value, what)


def default_expiry(cube: Cube, kind: str, stored_at: datetime) -> datetime | None:
    """The expiry the cube's ``ttl_days_<kind>`` gives an item stored at ``stored_at``."""
    settings = TierSettings.parse(cube.settings)
    days = {"turn": settings.ttl_days_turn, "chunk": settings.ttl_days_chunk}.get(kind, 0.0)
    return stored_at + timedelta(days=days) if days > 0 else None


def expired(item: MemoryItem, now: datetime) -> bool:
    """Whether the item's own ``expires_at`` has passed."""
    return item.expires_at is not None and item.expires_at <= now


def _gone(item: MemoryItem, hidden: frozenset[str], now: datetime) -> bool:
    """Whether ``item`` expired, is one of ``hidden`` or was made from one of them."""
    return (
        expired(item, now)
        or item.id in hidden
        or any(s.item_id in hidden for s in item.sources if s.item_id)
    )


def hidden_ids(store: ErasureStore, cube_ids: Sequence[str], now: datetime) -> frozenset[str]:
    """The ids of the expired items of these cubes not erased yet (at most ``HIDDEN_LOOKUP``)."""
    if not cube_ids:
        return frozenset()
    return frozenset(i for _, i in store.expired_items(now, HIDDEN_LOOKUP, list(cube_ids)))


def visible(store: ErasureStore, items: Iterable[MemoryItem]) -> list[MemoryItem]:
    """``items`` without the expired ones and those made from an expired item."""
    items = list(items)
    now = utcnow()
    hidden = hidden_ids(store, sorted({i.cube_id for i in items}), now)
    return [i for i in items if not _gone(i, hidden, now)]


def visible_hits(store: ErasureStore, hits: Iterable[Hit]) -> list[Hit]:
    """``hits`` without those ``visible`` leaves out."""
    hits = list(hits)
    kept = {id(i) for i in visible(store, [h.item for h in hits])}
    return [h for h in hits if id(h.item) in kept]


def search(
    store: ErasureStore, cube_ids: Sequence[str], top_k: int, run: Callable[[int], list[Hit]]
) -> list[Hit]:
    """``run(k)`` (a ranking of ``k`` hits) with the expired hits left out: it asks for as many
    more hits as expired items wait for the sweep, so ``top_k`` live hits still come back."""
    waiting = hidden_ids(store, cube_ids, utcnow())
    return visible_hits(store, run(top_k + len(waiting)))[:top_k]


def check_live(store: ErasureStore, item: MemoryItem) -> MemoryItem:
    """``item``, unless it is gone (``visible``): then ``ItemNotFound``, as for an erased one."""
    if not visible(store, [item]):
        raise ItemNotFound(item.id, item.cube_id)
    return item


def update_value(value: object) -> tuple[bool, datetime | None]:
    """What ``update(expires_at=value)`` asks: (change it?, the new expiry).  None leaves it as
    it is; ``"never"`` removes it; a time sets it."""
    if value is None:
        return False, None
    if value == NEVER:
        return True, None
    if isinstance(value, str) and value.strip().lower() == NEVER:
        raise ValidationError('write "never" in lower case to remove an expiry')
    return True, parse_expiry(value)


class ExpiryTasks:
    """Registers the ``expire`` task, queues it for cubes with expired items, and (in a process
    with worker threads) looks for them every ``sweep_s`` seconds in a thread of its own."""

    def __init__(
        self,
        store: ErasureScope,
        scheduler: Scheduler,
        forget: Callable[[list[str]], None],
        sweep_s: float,
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self._forget = forget
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        scheduler.register("expire", self._expire)
        if sweep_s > 0 and scheduler.workers > 0:
            self._thread = threading.Thread(
                target=self._loop, args=(sweep_s,), name="memstrata-expiry", daemon=True
            )
            self._thread.start()

    def sweep(self, cube_ids: Sequence[str] | None = None) -> list[str]:
        """Queue an ``expire`` task (deduplicated) for each cube (of ``cube_ids``, or any) that
        holds an expired item now; returns those cubes.  In inline mode the tasks run here."""
        due = self.store.expired_items(utcnow(), EXPIRY_BATCH, cube_ids)
        cubes = sorted({cube for cube, _ in due})
        for cube_id in cubes:
            self.scheduler.submit("expire", {}, cube_id=cube_id, dedupe_key=f"expire:{cube_id}")
        return cubes

    def close(self) -> None:
        """Stop the sweeping thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _loop(self, sweep_s: float) -> None:
        while not self._stop.wait(sweep_s):
            try:
                self.sweep()
            except Exception:
                # The thread's edge: a database error (locked, gone away) must not end the
                # sweeping; the next look tries again.
                log.exception("the expiry sweep could not look for expired items")

    def erase_batch(self, cube_id: str) -> tuple[int, bool]:
        """Erase up to ``EXPIRY_BATCH`` of the cube's expired items now, with every item derived
        from them; (how many items were erased, whether more may be due)."""
        now = utcnow()
        due = [i for _, i in self.store.expired_items(now, EXPIRY_BATCH, [cube_id])]
        if not due:
            return 0, False
        ids = erase._with_derived(self.store, cube_id, due)
        reason = f"expired (swept at {now.isoformat(timespec='seconds')})"
        count = self.store.erase_items(ids, [cube_id], EXPIRY_ACTOR, reason)
        if count:
            self._forget([cube_id])  # KV caches and adapters were computed with them
        return count, len(due) == EXPIRY_BATCH

    def _expire(self, task: Task) -> None:
        """Task ``expire``: ``erase_batch`` of the task's cube; a full batch queues a follow-up
        (a running task frees its deduplication key)."""
        cube_id = task.cube_id
        if cube_id is None or self.store.get_cube(cube_id) is None:
            return
        if self.erase_batch(cube_id)[1]:
            self.sweep([cube_id])


class Expiry:
    """``MemoryOS.expire``: erase what has expired now, in the caller's thread."""

    def __init__(self, parts: Components, tasks: ExpiryTasks) -> None:
        self._parts = parts
        self._tasks = tasks

    def expire(self, *, user_id: str, cube_id: str | None = None) -> int:
        """Erase, now and in this thread, the items of ``cube_id`` whose ``expires_at`` has
        passed, with the items derived from them (what the ``expire`` task does in the
        background); returns how many items were erased.  Needs ``write`` on the cube; without
        ``cube_id``, an administrator, for every cube."""
        access = self._parts.access
        if cube_id is not None:
            return self._drain(access.cube(user_id, cube_id, "write").cube_id)
        access.admin(user_id)
        total = 0
        # Each cube found is drained whole, so every round finds other cubes or none.
        while due := self._parts.store.expired_items(utcnow(), EXPIRY_BATCH):
            erased = sum(self._drain(cube) for cube in sorted({cube for cube, _ in due}))
            if not erased:  # nothing could be erased: do not spin on it
                break
            total += erased
        return total

    def _drain(self, cube_id: str) -> int:
        """Erase the cube's expired items batch by batch until none is due; how many went."""
        total, more = 0, True
        while more:
            count, more = self._tasks.erase_batch(cube_id)
            total += count
            more = more and count > 0
        return total
