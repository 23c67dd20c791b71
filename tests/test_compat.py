"""The MemoryOS-compatible facade."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from memstrata.compat import Memoryos
from memstrata.errors import LLMNotConfigured


def test_memoryos_calls(tmp_path: Path) -> None:
    with Memoryos(user_id="ann", data_storage_path=str(tmp_path / "data"), short_term_capacity=2,
                  mid_term_similarity_threshold=0.0, workers=0) as memo:  # fmt: skip
        memo.add_memory("I live in Porto and I work as a nurse.", "Nice! How is the job?",
                        timestamp="2024-03-01T10:00:00Z", meta_data={"mood": "happy"})  # fmt: skip
        memo.add_memory("I adopted a cat named Pixel.", "Lovely name.")
        context = memo.retrieve_context("Where does Ann live?")
        assert "Porto" in context["context"]
        assert any("Porto" in p["text"] for p in context["retrieved_pages"])
        # the rules read what a turn says of its speaker at once (the latest fact wins before any
        # segment is hot); the segments' promotion adds the rest
        assert "lives in: Porto" in memo.get_user_profile_summary().splitlines()
        assert memo.force_mid_term_analysis() > 0
        profile = memo.get_user_profile_summary().splitlines()
        assert "lives in: Porto" in profile and "job: nurse" in profile
        assert memo.retrieve_context("Where does Ann live?")["retrieved_user_knowledge"]
        with pytest.raises(LLMNotConfigured):
            memo.get_response("hello")
    with Memoryos(user_id="ann", data_storage_path=str(tmp_path / "data"), workers=0) as again:
        assert "job: nurse" in again.get_user_profile_summary()  # persisted; reopening is safe


def test_get_response_answers_with_the_configured_chat_model(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        {"choices": [{"message": {"role": "assistant", "content": "Your cat is Pixel."}}]}
    )
    with Memoryos(user_id="ann", data_storage_path=str(tmp_path), workers=0,
                  openai_base_url=httpserver.url_for("/v1"), openai_api_key="sk-x",
                  llm_model="tiny") as memo:  # fmt: skip
        memo.add_memory("I adopted a cat named Pixel.", "Lovely name.")
        assert memo.get_response("What is my cat called?", style_hint="brief") == (
            "Your cat is Pixel."
        )
        request = next(r for r, _ in httpserver.log if r.path.endswith("/chat/completions"))
        assert request.headers["Authorization"] == "Bearer sk-x"
        body = request.get_json()
        assert body["model"] == "tiny" and "Pixel" in body["messages"][0]["content"]
        # the exchange is remembered, like MemoryOS's get_response
        assert "Your cat is Pixel." in memo.retrieve_context("cat")["context"]


def test_the_profile_names_a_hobby_talked_about_across_turns(tmp_path: Path) -> None:
    turns = [
        ("I went hiking in the Alps last weekend.", "Sounds great!"),
        ("I work as a nurse in Berlin.", "That must be demanding."),
        ("My favourite food is ramen.", "Yum."),
        ("I love hiking, it clears my head after long shifts.", "Makes sense."),
        ("I'm planning a hiking trip to Norway in July.", "Exciting!"),
        ("My sister visited me on Sunday.", "Nice."),
        ("We did a sunrise hike up the Zugspitze.", "Wow."),
        ("I bought new hiking boots yesterday.", "Good choice."),
    ]
    with Memoryos(user_id="u1", data_storage_path=str(tmp_path), workers=0) as memo:
        for user_input, reply in turns:
            memo.add_memory(user_input, reply)
        memo.force_mid_term_analysis()
        profile = memo.get_user_profile_summary().splitlines()
    assert "interest: hiking" in profile and "job: nurse" in profile
    assert profile.count("interest: hiking") == 1  # three mentions, one attribute
