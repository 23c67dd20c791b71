"""A MemoryOS-compatible facade, to move code written for MemoryOS's ``Memoryos`` to memstrata.

``Memoryos(user_id=..., data_storage_path=...)`` keeps one user's memory with one assistant in
``<data_storage_path>/memstrata.db``, mapping MemoryOS's settings to cube settings:
``short_term_capacity`` → ``working_capacity``, ``mid_term_capacity`` → ``mid_capacity``,
``mid_term_heat_threshold`` → ``heat_threshold``, ``mid_term_similarity_threshold`` →
``similarity_threshold``; ``openai_api_key``, ``openai_base_url`` and ``llm_model`` name the chat
model of ``get_response`` (any OpenAI-compatible endpoint; or pass ``llm_provider="local"``).
Unlike MemoryOS, nothing here needs an LLM except ``get_response``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memstrata.closing import Closing
from memstrata.memory import shaping
from memstrata.memory.system import MemoryOS


class Memoryos(Closing):
    """One user's memory with one assistant, through MemoryOS's calls."""

    def __init__(
        self,
        user_id: str,
        data_storage_path: str,
        *,
        assistant_id: str = "assistant",
        short_term_capacity: int = 10,
        mid_term_capacity: int = 2000,
        mid_term_heat_threshold: float = 5.0,
        mid_term_similarity_threshold: float = 0.6,
        embedder: str | None = None,
        workers: int = 1,
        openai_api_key: str | None = None,
        openai_base_url: str | None = None,
        llm_model: str | None = None,
        llm_provider: str | None = None,
    ) -> None:
        Path(data_storage_path).mkdir(parents=True, exist_ok=True)
        self.user_id = user_id
        self.assistant_id = assistant_id
        if llm_provider is None and openai_base_url is not None:
            llm_provider = "openai"
        self.memory = MemoryOS.open(
            str(Path(data_storage_path) / "memstrata.db"), embedder=embedder, workers=workers,
            llm_provider=llm_provider, llm_base_url=openai_base_url, llm_api_key=openai_api_key,
            llm_model=llm_model,
        )  # fmt: skip
        settings = {
            "working_capacity": short_term_capacity,
            "mid_capacity": mid_term_capacity,
            "heat_threshold": mid_term_heat_threshold,
            "similarity_threshold": mid_term_similarity_threshold,
        }
        self.cube_id = re.sub(r"[^A-Za-z0-9_.:@-]", "_", f"{user_id}--{assistant_id}")
        try:
            self.memory.attach(
                user_id, self.cube_id, name=f"{user_id} with {assistant_id}", settings=settings
            )
        except BaseException:
            self.memory.close()
            raise

    def close(self) -> None:
        self.memory.close()

    def add_memory(
        self,
        user_input: str,
        agent_response: str,
        timestamp: str | None = None,
        meta_data: dict[str, Any] | None = None,
    ) -> list[str]:
        """Remember one exchange (two turns); returns their item ids."""
        common: dict[str, Any] = {"metadata": meta_data or {}}
        if timestamp is not None:
            common["timestamp"] = timestamp
        messages = [
            {"role": "user", "name": self.user_id, "content": user_input, **common},
            {"role": "assistant", "name": self.assistant_id, "content": agent_response, **common},
        ]
        return self.memory.add(messages, user_id=self.user_id, cube_id=self.cube_id)

    def retrieve_context(self, query: str, budget_tokens: int = 1000) -> dict[str, Any]:
        """What MemoryOS's retriever returns, plus the packed ``context`` text.

        Pages are ``memory.shaping.page`` entries (id, text, speaker, timestamp); knowledge is
        the entries' text, as MemoryOS's ``retrieve_context`` gives it.
        """
        found = self.memory.recall(
            query, user_id=self.user_id, cube_id=self.cube_id, budget_tokens=budget_tokens
        )
        return {
            "context": found.context.text,
            "retrieved_pages": [shaping.page(i) for i in found.pages],
            "retrieved_user_knowledge": [i.text for i in found.user_knowledge],
            "retrieved_assistant_knowledge": [i.text for i in found.assistant_knowledge],
            "user_profile": found.profile,
        }

    def get_user_profile_summary(self) -> str:
        """The user's current profile attributes, one ``key: value`` line each ("" if none)."""
        return self.memory.profile_summary(user_id=self.user_id, cube_id=self.cube_id)

    def force_mid_term_analysis(self) -> int:
        """Promote every mid-term segment into long-term memory now; returns the findings read."""
        return self.memory.consolidate(self.cube_id, user_id=self.user_id, promote_all=True)

    def get_response(self, query: str, **_: Any) -> str:
        """The chat model's answer from memory; the exchange is remembered (``MemoryOS.chat``).

        MemoryOS's other arguments (``relationship_with_user``, ``style_hint``, …) are accepted
        and ignored.  ``LLMNotConfigured`` when no chat model was given.
        """
        return self.memory.chat(query, user_id=self.user_id, cube_id=self.cube_id).answer
