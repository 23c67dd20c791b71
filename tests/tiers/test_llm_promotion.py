"""Promotion with the ``llm`` reader, against a fake chat API at the HTTP transport only."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS
from memstrata.filters import Filters

HOT = {"working_capacity": 1, "similarity_threshold": 0.0, "heat_threshold": 0.0}


def answer(request: Request) -> Response:
    """A model that reads 'Porto' from page p1, and summarises any segment the same way."""
    asked = json.loads(request.get_data())
    if "summary" in json.dumps(asked.get("response_format", {})):
        content: dict[str, object] = {"summary": "Ann says where she lives."}
    else:
        content = {"findings": [{"type": "profile", "text": "Ann lives in Porto.", "subject": "Ann",
                                 "key": "lives_in", "value": "Porto", "sources": ["p1"]}]}  # fmt: skip
    body = {
        "choices": [{"message": {"role": "assistant", "content": json.dumps(content)}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10},
    }
    return Response(json.dumps(body), content_type="application/json")


def remember(mos: MemoryOS) -> str:
    mos.create_user("u")
    cube = mos.create_cube("c", owner="u", settings=HOT).cube_id
    mos.add([{"name": "Ann", "content": "I live in Porto near the river."},
             {"name": "Bob", "content": "ok"}], user_id="u", cube_id=cube)  # fmt: skip
    assert mos.wait(cube, timeout=30)
    return cube


def test_the_llm_reader_promotes_and_its_tokens_are_counted(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    httpserver.expect_request("/v1/models").respond_with_json({"data": []})
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(answer)
    with MemoryOS.open(str(tmp_path / "m.db"), workers=0, reader="llm",
                       llm_base_url=httpserver.url_for("/v1")) as mos:  # fmt: skip
        cube = remember(mos)
        (item,) = mos.store.list_items(cube, Filters(tiers=("long",)))
        assert item.text == "Ann lives in Porto." and item.metadata["value"] == "Porto"
        (segment,) = mos.store.list_items(cube, Filters(types=("segment",)))
        assert segment.text == "Ann says where she lives."  # the LLM's summary replaced the rules'
        # one call to read the promotion batch, one for the summary
        totals = mos.store.llm_usage(cube)
        assert totals == {"calls": 2, "prompt_tokens": 100, "completion_tokens": 20}


def test_an_unreachable_llm_warns_at_open_and_promotion_falls_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with caplog.at_level(logging.WARNING), MemoryOS.open(
        str(tmp_path / "m.db"), workers=0, reader="llm", llm_base_url=f"http://127.0.0.1:{port}/v1",
        llm_timeout_s=1.0,
    ) as mos:  # fmt: skip
        assert "not available" in caplog.text
        cube = remember(mos)  # add never blocks on the model
        profile = mos.get_profile(user_id="u", cube_id=cube)
        assert [(a.key, a.value) for a in profile] == [("lives_in", "Porto")]  # offline rules
