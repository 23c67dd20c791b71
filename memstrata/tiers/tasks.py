"""The tiers' background work (§8): the scheduler tasks that move memories between
tiers, and the read counts that heat segments.

Tasks: ``consolidate`` (a cube's working overflow into the mid tier, queued after each add),
``promote`` (a hot segment's pages into the long tier), ``visits`` (read counts into heat).
Each is idempotent; each checks the cube's embedder first, so a mismatched cube fails its task
with ``EmbedderMismatch`` instead of mixing vector spaces.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from memstrata.embed.base import Embedder, check_cube_embedder, fingerprint
from memstrata.filters import Filters
from memstrata.llm import LLM, Completion
from memstrata.model import Cube, MemoryItem, utcnow
from memstrata.reader.findings import Reader
from memstrata.reader.llm import LLMReader, LLMSummariser
from memstrata.reader.offline import OfflineReader
from memstrata.scheduler import Scheduler, Task
from memstrata.store.base import ItemStore, TierTaskStore
from memstrata.tiers.long import LongTier
from memstrata.tiers.mid import SEGMENTS, record_visits
from memstrata.tiers.settings import TierSettings
from memstrata.tiers.working import consolidate

#: Seconds a cube's consolidation waits after an add, so that a burst of adds shares one task.
CONSOLIDATE_DELAY_S = 1.0
#: The turns ``_note`` reads: still in the working tier, not yet promoted.
WORKING_TURNS = Filters(tiers=("working",), types=("turn",), statuses=("generated",))
#: Seconds between writes of read counts (segment visits).
READS_FLUSH_S = 5.0


class TierTasks:
    """Registers the tier tasks on a scheduler and queues them.  Thread-safe."""

    def __init__(
        self,
        store: TierTaskStore,
        embedder: Embedder,
        scheduler: Scheduler,
        *,
        llm: LLM | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.scheduler = scheduler
        self.llm = llm
        # reads by (cube id, item id): the visits task writes each cube's with its cube named
        self._reads: Counter[tuple[str, str]] = Counter()
        self._reads_lock = threading.Lock()
        self._reads_flushed = time.monotonic()
        scheduler.register("consolidate", self._consolidate)
        scheduler.register("promote", self._promote)
        scheduler.register("visits", self._visits)

    def added(self, cube_id: str) -> None:
        """Queue the cube's consolidation after an add (delayed with workers, so a burst of adds
        meets one pending, deduplicated task instead of queueing one each)."""
        delay = 0.0 if self.scheduler.inline else CONSOLIDATE_DELAY_S
        self.scheduler.submit(
            "consolidate", {}, cube_id=cube_id, dedupe_key=f"consolidate:{cube_id}",
            delay_s=delay,
        )  # fmt: skip

    def consolidate_now(self, cube: Cube, promote_all: bool) -> int:
        """Consolidate ``cube`` in this thread; with ``promote_all`` promote every active segment.

        Returns how many findings the long tier took in (0 without ``promote_all``).
        """
        check_cube_embedder(cube, self.embedder)
        self._note(cube)
        segments = consolidate(self.store, cube.cube_id, fingerprint(self.embedder))
        if not promote_all:
            self._promote_hot(segments)
            return 0
        long_tier = LongTier(self.store, self.embedder, self.reader(cube.cube_id))
        active = self.store.list_items(cube.cube_id, SEGMENTS)
        return sum(len(long_tier.promote(cube.cube_id, segment.id)) for segment in active)

    def note_reads(self, items: Iterable[MemoryItem]) -> None:
        """Count reads; a ``visits`` task writes them out every ``READS_FLUSH_S`` seconds.

        Nothing is written on the search path itself; counts not yet flushed are
        lost if the process dies, which only makes a topic a little colder.
        """
        with self._reads_lock:
            self._reads.update((item.cube_id, item.id) for item in items)
        self.flush_reads()

    def flush_reads(self, force: bool = False) -> None:
        with self._reads_lock:
            due = force or time.monotonic() - self._reads_flushed >= READS_FLUSH_S
            if not due or not self._reads:
                return
            reads: dict[str, dict[str, int]] = {}
            for (cube_id, item_id), n in self._reads.items():
                reads.setdefault(cube_id, {})[item_id] = n
            self._reads = Counter()
            self._reads_flushed = time.monotonic()
        self.scheduler.submit("visits", {"reads": reads})

    def reader(self, cube_id: str) -> Reader:
        """The reader promotions use: the LLM's, counting its tokens against the cube, or rules."""
        if self.llm is None:
            return OfflineReader(self.embedder)
        return LLMReader(
            self.llm, fallback=OfflineReader(self.embedder), on_usage=partial(self._count, cube_id)
        )

    def _count(self, cube_id: str, completion: Completion) -> None:
        """Count one LLM call and its tokens against ``cube_id``."""
        self.store.record_usage(cube_id, completion.prompt_tokens, completion.completion_tokens)

    def _cube(self, task: Task) -> Cube | None:
        cube = self.store.get_cube(task.cube_id or "")
        if cube is not None:
            check_cube_embedder(cube, self.embedder)
        return cube

    def _consolidate(self, task: Task) -> None:
        """Task ``consolidate``: move overflowing working turns of a cube into the mid tier."""
        cube = self._cube(task)
        if cube is not None:  # else the cube is gone: nothing to do
            self._note(cube)
            self._promote_hot(consolidate(self.store, cube.cube_id, fingerprint(self.embedder)))

    def _note(self, cube: Cube) -> None:
        """Read what the rules find in the cube's working turns (attributes, preferences,
        changes) into the long tier before they move on: a change is known at once, whether
        or not its segment ever gets hot (``LongTier.note``)."""
        turns = self.store.list_items(cube.cube_id, WORKING_TURNS)
        if turns:
            LongTier(self.store, self.embedder, self.reader(cube.cube_id)).note(turns)

    def _promote(self, task: Task) -> None:
        """Task ``promote``: read a hot segment's unprocessed pages into the long tier; with an
        LLM, also rewrite the segment's summary (one more call)."""
        cube = self._cube(task)
        if cube is None:
            return
        segment_id = task.payload["segment_id"]
        LongTier(self.store, self.embedder, self.reader(cube.cube_id)).promote(
            cube.cube_id, segment_id
        )
        if self.llm is not None:
            self._summarise(cube.cube_id, segment_id, self.llm)

    def _summarise(self, cube_id: str, segment_id: str, llm: LLM) -> None:
        """Replace a segment's extractive summary with the LLM's, when the LLM gives a usable
        one (the segment's vector, its pages' centroid, stays)."""
        found = self.store.get_items([segment_id], [cube_id])
        if not found:
            return
        segment = found[0]
        pages = self.store.get_items([s.item_id for s in segment.sources if s.item_id], [cube_id])
        summariser = LLMSummariser(llm, on_usage=partial(self._count, cube_id))
        lines = [f"{p.speaker or p.role or 'someone'}: {p.text}" for p in pages]
        summary = summariser.summarise(lines)
        if summary is not None and summary != segment.text:
            self.store.update_item(
                replace(segment, text=summary), None, op="update", actor=None,
                reason="summary written by the LLM", snapshot=False,
            )  # fmt: skip

    def _visits(self, task: Task) -> None:
        """Task ``visits``: record reads and heat the segments read; promote the hot ones."""
        reads = _reads_by_cube(self.store, task.payload)
        now = utcnow()
        for cube_id, counts in sorted(reads.items()):
            self._promote_hot(record_visits(self.store, cube_id, counts, now))

    def _promote_hot(self, segments: list[MemoryItem]) -> None:
        """Queue the promotion of every segment whose heat reached its cube's threshold."""
        for segment in segments:
            cube = self.store.get_cube(segment.cube_id)
            if cube is None or segment.heat is None:
                continue
            if segment.heat >= TierSettings.parse(cube.settings).heat_threshold:
                self.scheduler.submit(
                    "promote", {"segment_id": segment.id}, cube_id=cube.cube_id,
                    dedupe_key=f"promote:{cube.cube_id}:{segment.id}",
                )  # fmt: skip


def _reads_by_cube(store: ItemStore, payload: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """A ``visits`` task's read counts by cube, then item id.  A task queued before reads were
    counted by cube (``{"counts": {item id: n}}``) has each item's cube looked up by id."""
    if "reads" in payload:
        return {
            str(cube): {str(k): int(v) for k, v in counts.items()}
            for cube, counts in payload["reads"].items()
        }
    counts = {str(k): int(v) for k, v in payload.get("counts", {}).items()}
    reads: dict[str, dict[str, int]] = {}
    for item_id, cube_id in store.item_cubes(list(counts)).items():
        reads.setdefault(cube_id, {})[item_id] = counts[item_id]
    return reads
