"""Chat models: the ``LLM`` Protocol, an OpenAI-compatible client, and usage accounting."""

from __future__ import annotations

from memstrata.config import Settings
from memstrata.errors import ConfigurationError
from memstrata.llm.base import LLM, ChatMessage, Completion, strip_think
from memstrata.llm.openai import OpenAIChat

__all__ = ["LLM", "ChatMessage", "Completion", "OpenAIChat", "make_llm", "strip_think"]

READERS = ("offline", "llm")


def make_llm(settings: Settings) -> LLM | None:
    """The chat model ``settings`` configure, or None for the offline reader.

    Connects to nothing yet (the first call does).  Raises ``ConfigurationError`` for an unknown
    ``reader``.  The caller owns the result and must ``close()`` it.
    """
    if settings.reader not in READERS:
        raise ConfigurationError(
            f"unknown reader {settings.reader!r}", hint=f"use one of: {', '.join(READERS)}"
        )
    if settings.reader == "offline":
        return None
    return OpenAIChat(
        settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        timeout_s=settings.llm_timeout_s,
    )
