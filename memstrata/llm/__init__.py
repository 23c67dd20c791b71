"""Chat models: the ``LLM`` Protocol, an OpenAI-compatible client and a local model
(usage is counted per cube by the store's ``UsageStore``)."""

from __future__ import annotations

from memstrata.config import Settings
from memstrata.errors import ConfigurationError
from memstrata.llm.base import LLM, ChatMessage, Completion, strip_think
from memstrata.llm.local import LocalChat
from memstrata.llm.openai import OpenAIChat

__all__ = [
    "LLM",
    "ChatMessage",
    "Completion",
    "LocalChat",
    "OpenAIChat",
    "llm_provider",
    "make_llm",
    "strip_think",
]

READERS = ("offline", "llm")
PROVIDERS = ("none", "openai", "local")


def llm_provider(settings: Settings) -> str:
    """The provider ``settings`` choose: ``reader = "llm"`` with ``none`` means ``openai``."""
    for name, value, allowed in (
        ("reader", settings.reader, READERS),
        ("llm_provider", settings.llm_provider, PROVIDERS),
    ):
        if value not in allowed:
            raise ConfigurationError(
                f"unknown {name} {value!r}", hint=f"use one of: {', '.join(allowed)}"
            )
    if settings.llm_provider == "none" and settings.reader == "llm":
        return "openai"
    return settings.llm_provider


def make_llm(settings: Settings) -> LLM | None:
    """The chat model ``settings`` configure (see ``llm_provider``), or None.

    Connects to nothing and loads nothing yet (the first call does).  Raises
    ``ConfigurationError`` for an unknown reader or provider, or a local model that is missing.
    The caller owns the result and must ``close()`` it.
    """
    provider = llm_provider(settings)
    if provider == "none":
        return None
    if provider == "local":
        return LocalChat(settings.llm_model_path, threads=settings.embed_threads)
    return OpenAIChat(
        settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        timeout_s=settings.llm_timeout_s,
    )
