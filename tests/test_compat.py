"""The MemoryOS-compatible facade."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata.compat import Memoryos
from memstrata.errors import ConfigurationError


def test_memoryos_calls(tmp_path: Path) -> None:
    with Memoryos(user_id="ann", data_storage_path=str(tmp_path / "data"), short_term_capacity=2,
                  mid_term_similarity_threshold=0.0, workers=0) as memo:  # fmt: skip
        memo.add_memory("I live in Porto and I work as a nurse.", "Nice! How is the job?",
                        timestamp="2024-03-01T10:00:00Z", meta_data={"mood": "happy"})  # fmt: skip
        memo.add_memory("I adopted a cat named Pixel.", "Lovely name.")
        context = memo.retrieve_context("Where does Ann live?")
        assert "Porto" in context["context"]
        assert any("Porto" in p["text"] for p in context["retrieved_pages"])
        assert memo.get_user_profile_summary() == ""  # nothing promoted yet
        assert memo.force_mid_term_analysis() > 0
        profile = memo.get_user_profile_summary().splitlines()
        assert "lives in: Porto" in profile and "job: nurse" in profile
        assert memo.retrieve_context("Where does Ann live?")["retrieved_user_knowledge"]
        with pytest.raises(ConfigurationError, match="LLM"):
            memo.get_response("hello")
    with Memoryos(user_id="ann", data_storage_path=str(tmp_path / "data"), workers=0) as again:
        assert "job: nurse" in again.get_user_profile_summary()  # persisted; reopening is safe
