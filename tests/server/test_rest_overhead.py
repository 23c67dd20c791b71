"""What the REST layer adds to a search (issue 29): the work around ``MemoryOS.search`` itself.

Real parts: the session's REST server on both engines (``conftest.server``, uvicorn in a thread of
this process), the e5 embedder.  FastAPI runs each sync dependency, each sync route and the
validation of a sync route's return value in its thread pool; every hop is a thread handoff each
way (about 0.1 ms of CPU here, ``bench/rest_overhead.py``), so the count is pinned here rather
than a time, which this shared machine could not keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import pytest

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account


def _count_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the name of each function the server hands to anyio's thread pool from now on."""
    handed: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(func, "__name__", repr(func)))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return handed


def test_a_search_takes_two_thread_pool_hops(
    owner_cube: tuple[Account, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key check and the route; the app's ``MemoryOS`` and the answer's serialization take
    none (before: four, one for ``memory_of`` and one to validate the route's return value)."""
    owner, cube_id = owner_cube
    warm = owner.http.post("/search", json={"query": "where did Ann move?", "cube_ids": [cube_id]})
    assert warm.status_code == 200, warm.text
    handed = _count_hops(monkeypatch)
    found = owner.http.post("/search", json={"query": "where did Ann move?", "cube_ids": [cube_id]})
    assert found.status_code == 200, found.text
    assert len(handed) == 2, handed
    assert found.headers["content-type"] == "application/json"
    hits = found.json()["hits"]
    assert "Porto" in hits[0]["text"]
    assert all("parts" not in hit for hit in hits)  # still left out unless explain is asked


def test_a_search_answer_keeps_its_parts_and_its_described_schema(
    owner_cube: tuple[Account, str],
) -> None:
    """The route now serializes its answer itself (through ``SearchOut``): with ``explain`` each
    hit carries its parts, and the OpenAPI description still names ``SearchOut``."""
    owner, cube_id = owner_cube
    body = {"query": "where did Ann move?", "cube_ids": [cube_id], "explain": True}
    found = owner.http.post("/search", json=body)
    assert found.status_code == 200, found.text
    hit = found.json()["hits"][0]
    assert hit["parts"] and abs(sum(p["value"] for p in hit["parts"]) - hit["score"]) < 1e-6
    described = owner.http.get("/openapi.json").json()["paths"]["/search"]["post"]
    schema = described["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/SearchOut"}
