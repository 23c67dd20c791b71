"""One error shape for everything: FastAPI's own errors, size limits, unexpected exceptions;
and the operations endpoints (metrics, chat without a model)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:  # conftest is not importable under every way of running pytest
    from tests.server.conftest import Account, Server

    NewUser = Callable[..., Account]
    OwnerCube = tuple[Account, str]


def _error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert set(body["error"]) <= {"code", "message", "hint"}
    return dict(body["error"])


def test_malformed_json_is_422(admin: httpx.Client) -> None:
    sent = {"content": b'{"query": "x",', "headers": {"Content-Type": "application/json"}}
    for path in ["/search", "/memories", "/mem_cubes", "/users", "/context"]:
        error = _error(admin.post(path, **sent), 422, "invalid_input")  # type: ignore[arg-type]
        assert "JSON" in error["message"], path


def test_a_body_that_does_not_fit_the_schema_is_422_naming_the_field(admin: httpx.Client) -> None:
    error = _error(admin.post("/search", json={"top_k": "many"}), 422, "invalid_input")
    assert "body.query: Field required" in error["message"]
    assert "body.top_k" in error["message"]
    error = _error(admin.get("/memories/c", params={"limit": "x"}), 422, "invalid_input")
    assert "query.limit" in error["message"]
    nan = admin.post(
        "/configure",
        content=b'{"keyword_weight": NaN}',
        headers={"Content-Type": "application/json"},
    )
    _error(nan, 422, "invalid_input")


def test_unknown_paths_and_methods(admin: httpx.Client, server: Server) -> None:
    _error(admin.get("/no/such/endpoint"), 404, "not_found")
    _error(server.client().get("/no/such/endpoint"), 404, "not_found")
    error = _error(admin.delete("/search"), 405, "method_not_allowed")
    assert error["message"] == "DELETE is not allowed on /search"


def test_a_body_over_the_limit_is_413(server: Server, owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    limit = server.memory.settings.max_request_bytes
    big = "x" * limit
    declared = owner.http.post("/memories", json={"cube_id": cube_id, "memory_content": big})
    assert "max_request_bytes" in _error(declared, 413, "payload_too_large")["hint"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server must count
        yield json.dumps({"cube_id": cube_id, "memory_content": "y"})[:-1].encode()
        for _ in range(limit // 1000 + 1):
            yield b" " * 1000
        yield b"}"

    streamed = owner.http.post(
        "/memories", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in streamed.request.headers
    _error(streamed, 413, "payload_too_large")
    upload = {"file": ("big.txt", b"z" * limit)}
    _error(
        owner.http.post("/memories", files=upload, data={"cube_id": cube_id}),
        413,
        "payload_too_large",
    )
    assert owner.http.get(f"/memories/{cube_id}").json()[-1]["text"] != big
    # Padded with JSON whitespace: one long text would take the embedder a long while.
    small = json.dumps({"cube_id": cube_id, "memory_content": "it fits"}).encode()
    padded = small[:-1] + b" " * (limit - len(small)) + b"}"
    assert len(padded) == limit
    fits = owner.http.post(
        "/memories", content=padded, headers={"Content-Type": "application/json"}
    )
    assert fits.status_code == 200, fits.text


def test_an_unexpected_error_is_a_500_with_an_id_in_the_log(
    server: Server, admin: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="memstrata.server"):
        response = admin.get(server.boom_path)
    error = _error(response, 500, "internal_error")
    found = re.search(r"id ([0-9a-f]{12})$", error["message"])
    assert found is not None, error
    assert "Traceback" not in response.text
    assert "nobody handled" not in response.text
    (record,) = [r for r in caplog.records if found.group(1) in r.getMessage()]
    assert record.exc_info is not None
    assert "nobody handled" in str(record.exc_info[1])
    assert admin.get("/health").status_code == 200  # the server carries on


def test_chat_without_a_chat_model_is_503(owner_cube: OwnerCube) -> None:
    owner, cube_id = owner_cube
    for path in ["/chat", "/chat/stream"]:
        response = owner.http.post(path, json={"query": "Where do I live?", "cube_id": cube_id})
        error = _error(response, 503, "llm_not_configured")
        assert "MEMSTRATA_LLM_PROVIDER" in error["hint"]
    bad = owner.http.post("/chat", json={"query": "x", "cube_id": cube_id, "max_tokens": 0})
    _error(bad, 422, "invalid_input")


def test_metrics_count_requests_by_route_and_status(owner_cube: OwnerCube, server: Server) -> None:
    owner, cube_id = owner_cube
    owner.http.get(f"/memories/{cube_id}/nope")
    owner.http.get("/no/such/endpoint")
    server.client().get("/openapi.json")
    text = owner.http.get("/metrics").text
    lines = text.splitlines()
    assert "# TYPE memstrata_http_requests_total counter" in lines
    route = 'route="/memories/{cube_id}/{memory_id}"'
    assert any(route in line and 'status="404"' in line for line in lines)
    assert any('route="unmatched",status="404"' in line for line in lines)
    assert any('route="/openapi.json",status="200"' in line for line in lines)
    assert any(
        line.startswith("memstrata_http_request_duration_seconds_bucket")
        and 'route="/mem_cubes",status="201",le="+Inf"' in line
        for line in lines
    )
    items = f'memstrata_items{{cube_id="{cube_id}",tier="working",type="turn"}} 2'
    assert items in lines
    assert f'memstrata_pending_tasks{{cube_id="{cube_id}"}}' in text
    assert 'memstrata_llm_calls_total{cube_id="' in text
    for line in lines:  # every sample line is NAME{LABELS} VALUE
        assert line.startswith("#") or re.fullmatch(r"[a-z_]+(\{.*\})? [0-9.e+-]+", line), line
    assert text.endswith("\n")
    _error(server.client().get("/metrics"), 401, "unauthenticated")


def test_metrics_say_where_searches_spend_their_time(owner_cube: OwnerCube) -> None:
    owner, _ = owner_cube

    def counts(name: str = "memstrata_search_stage_seconds_count") -> dict[str, float]:
        lines = owner.http.get("/metrics").text.splitlines()
        return {re.findall(r'stage="(\w+)"', line)[0]: float(line.rsplit(" ", 1)[1])
                for line in lines if line.startswith(name + "{")}  # fmt: skip

    cpu = "memstrata_search_stage_cpu_seconds_total"
    before, cpu_before = counts(), counts(cpu)
    assert owner.http.post("/search", json={"query": "Where did Ann move?"}).status_code == 200
    assert owner.http.post("/context", json={"query": "Ann's cat"}).status_code == 200
    after, cpu_after = counts(), counts(cpu)
    for stage in ("question", "embed", "keyword", "dense", "fetch", "pack"):
        assert after[stage] > before[stage], stage
    # CPU time accrues where the work is done (the dense scan and the fetch run in the
    # calling thread).
    assert cpu_after["fetch"] > cpu_before["fetch"] and cpu_after["pack"] > cpu_before["pack"]
