"""Where searches spend their time: wall-clock seconds per stage, for the whole process.

``CLOCK.timed(stage)`` around each step of a search adds its duration to that stage's histogram;
``/metrics`` shows them (``memstrata_search_stage_seconds``), so a slow tail can be traced to
the stage that makes it from the metrics alone.  Beside the wall clock, each stage also counts
the CPU seconds of the thread that ran it (``memstrata_search_stage_cpu_seconds_total``): wall
time well above CPU time means waiting (for a lock, the disk, or a core another request holds),
not work.  The embedder's own native threads are not in its caller's CPU time, so ``embed``'s
CPU figure is a floor.

Stages: ``question`` (reading the names and dates a query gives), ``embed`` (the query vector),
``keyword`` and ``dense`` (the two channels), ``fetch`` (the hits' items), ``neighbours``
(adjacent-turn smoothing), ``time`` (weighing by time and chatter, ``retrieval.timeline``, then
the agreement rule, ``retrieval.agreement``),
``pack`` (a context's rendering, in ``memory.reading``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

STAGES = ("question", "embed", "keyword", "dense", "fetch", "neighbours", "time", "pack")
#: Upper bounds (seconds) of each stage's histogram buckets.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


@dataclass
class Timings:
    """One stage's histogram: how many, their total seconds, and the count per bucket."""

    count: int = 0
    seconds: float = 0.0
    #: CPU seconds of the calling thread (``time.thread_time``)
    cpu_seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))


class StageClock:
    """Histograms of stage durations.  Thread-safe; one per process (``CLOCK``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages = {stage: Timings() for stage in STAGES}

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Add the duration of the block to ``stage`` (a ``KeyError`` for an unknown stage)."""
        timings = self._stages[stage]
        start, cpu_start = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            cpu = time.thread_time() - cpu_start
            with self._lock:
                timings.count += 1
                timings.seconds += seconds
                timings.cpu_seconds += cpu
                for i, bound in enumerate(BUCKETS):
                    if seconds <= bound:
                        timings.buckets[i] += 1

    def snapshot(self) -> dict[str, Timings]:
        """A copy of every stage's histogram."""
        with self._lock:
            return {
                s: Timings(t.count, t.seconds, t.cpu_seconds, list(t.buckets))
                for s, t in self._stages.items()
            }


CLOCK = StageClock()
