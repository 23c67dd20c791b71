"""Prometheus metrics of the REST server, in the text exposition format (version 0.0.4).

Written by hand: three families of the server's own, plus the caller's cubes from
``MemoryOS.stats``::

    memstrata_http_requests_total{method,route,status}            counter
    memstrata_http_request_duration_seconds{method,route,status}  histogram (_bucket, _sum, _count)
    memstrata_items{cube_id,tier,type}                            gauge: live items
    memstrata_pending_tasks{cube_id}                              gauge
    memstrata_llm_{calls,prompt_tokens,completion_tokens}_total{cube_id}   counters
    memstrata_search_stage_seconds{stage}                         histogram: retrieval.stages
    memstrata_search_stage_cpu_seconds_total{stage}               counter: the same, CPU time

``route`` is the route's path template (``/memories/{cube_id}``), or ``unmatched`` for a path that
is no endpoint, so the number of series stays bounded whatever clients send.  Durations are
seconds from the request's arrival to the end of its response (the whole stream for a stream).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstrata.retrieval.stages import BUCKETS as STAGE_BUCKETS
from memstrata.retrieval.stages import Timings

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Upper bounds (seconds) of the latency histogram's buckets.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_REQUESTS = "memstrata_http_requests_total"
_DURATION = "memstrata_http_request_duration_seconds"
_Key = tuple[str, str, str]


@dataclass
class _Series:
    count: int = 0
    seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))


class Metrics:
    """Request counts and latencies by method, route and status.  Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[_Key, _Series] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        with self._lock:
            series = self._series.setdefault((method, route, str(status)), _Series())
            series.count += 1
            series.seconds += seconds
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    series.buckets[i] += 1

    def lines(self) -> Iterator[str]:
        """The request families, in exposition format, one line per item."""
        with self._lock:
            series = {
                key: _Series(s.count, s.seconds, list(s.buckets)) for key, s in self._series.items()
            }
        yield f"# HELP {_REQUESTS} HTTP requests by method, route and status."
        yield f"# TYPE {_REQUESTS} counter"
        for key, s in sorted(series.items()):
            yield f"{_REQUESTS}{_labels(_names(key))} {s.count}"
        yield f"# HELP {_DURATION} HTTP request latency by method, route and status."
        yield f"# TYPE {_DURATION} histogram"
        for key, s in sorted(series.items()):
            names = _names(key)
            for bound, n in zip(BUCKETS, s.buckets, strict=True):
                yield f"{_DURATION}_bucket{_labels({**names, 'le': repr(bound)})} {n}"
            yield f"{_DURATION}_bucket{_labels({**names, 'le': '+Inf'})} {s.count}"
            yield f"{_DURATION}_sum{_labels(names)} {s.seconds!r}"
            yield f"{_DURATION}_count{_labels(names)} {s.count}"


def stats_lines(stats: Mapping[str, Any]) -> Iterator[str]:
    """The cube families from ``MemoryOS.stats`` output (cube id → items, tasks, LLM usage)."""
    yield "# HELP memstrata_items Live memory items by cube, tier and type."
    yield "# TYPE memstrata_items gauge"
    for cube_id, cube in sorted(stats.items()):
        for tier_type, count in sorted(cube["items"].items()):
            tier, _, kind = tier_type.partition("/")
            yield f"memstrata_items{_labels({'cube_id': cube_id, 'tier': tier, 'type': kind})} {count}"
    yield "# HELP memstrata_pending_tasks Background tasks waiting to run, by cube."
    yield "# TYPE memstrata_pending_tasks gauge"
    for cube_id, cube in sorted(stats.items()):
        yield f"memstrata_pending_tasks{_labels({'cube_id': cube_id})} {cube['pending_tasks']}"
    for counter in ("calls", "prompt_tokens", "completion_tokens"):
        name = f"memstrata_llm_{counter}_total"
        yield f"# HELP {name} Chat model {counter.replace('_', ' ')} counted against a cube."
        yield f"# TYPE {name} counter"
        for cube_id, cube in sorted(stats.items()):
            value = cube.get("llm_usage", {}).get(counter, 0)
            yield f"{name}{_labels({'cube_id': cube_id})} {value}"


def stage_lines(timings: Mapping[str, Timings]) -> Iterator[str]:
    """Each search stage's histogram (``retrieval.stages``): where searches spend their time."""
    name = "memstrata_search_stage_seconds"
    yield f"# HELP {name} Wall-clock seconds of each stage of the searches of this process."
    yield f"# TYPE {name} histogram"
    for stage, t in timings.items():
        for bound, n in zip(STAGE_BUCKETS, t.buckets, strict=True):
            yield f"{name}_bucket{_labels({'stage': stage, 'le': repr(bound)})} {n}"
        yield f"{name}_bucket{_labels({'stage': stage, 'le': '+Inf'})} {t.count}"
        yield f"{name}_sum{_labels({'stage': stage})} {t.seconds!r}"
        yield f"{name}_count{_labels({'stage': stage})} {t.count}"
    name = "memstrata_search_stage_cpu_seconds_total"
    yield f"# HELP {name} CPU seconds of the threads that ran each search stage in this process."
    yield f"# TYPE {name} counter"
    for stage, t in timings.items():
        yield f"{name}{_labels({'stage': stage})} {t.cpu_seconds!r}"


def _names(key: _Key) -> dict[str, str]:
    method, route, status = key
    return {"method": method, "route": route, "status": status}


def _labels(values: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in values.items()) + "}"


def _escape(value: str) -> str:
    """A label value as the exposition format quotes it (backslash, quote, newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricsMiddleware:
    """Time every HTTP request and count it in ``metrics`` under its route template.

    The template is the matched route's (``scope["route"]``); for a route that does not record
    itself there (FastAPI's ``/docs`` and ``/openapi.json``), the first of ``routes`` that matches.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute] = ()) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client sees when nothing was sent

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            method = str(scope.get("method", ""))
            self.metrics.observe(method, self._route(scope), status, time.perf_counter() - start)

    def _route(self, scope: Scope) -> str:
        path = getattr(scope.get("route"), "path", None)
        if isinstance(path, str):
            return path
        for route in self.routes:
            if isinstance(route, Route) and route.matches(scope)[0] is not Match.NONE:
                return route.path
        return "unmatched"
