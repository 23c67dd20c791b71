"""The chat model seam: one ``complete`` call, whatever serves it (the LLM Protocol).

A backend turns a list of chat messages into a ``Completion``: the answer's text (reasoning
``<think>`` blocks removed) and the tokens the server counted.  Backends raise ``LLMError`` for
every failure of the model endpoint and nothing else; callers decide whether to retry or fall back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict


class ChatMessage(TypedDict):
    """One message of a chat: ``role`` and ``content``."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Completion:
    """A model's answer and its cost in tokens (as the server reported them; 0 when it did not)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLM(Protocol):
    """A chat model.  Implementations are thread-safe and hold connections until ``close()``."""

    model: str

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        """The model's answer to ``messages``.

        With ``json_schema`` the server is asked for a JSON object of that shape (servers that
        cannot enforce a schema may ignore it: callers still validate).  Raises ``LLMError``.
        """

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> Iterator[str]:
        """The answer in pieces as the model writes them, ``<think>`` blocks left out.

        Raises ``LLMError`` (before the first piece or between pieces).
        """

    def close(self) -> None:
        """Release connections; the object must not be used afterwards."""


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def strip_think(text: str) -> str:
    """``text`` without reasoning blocks, trimmed.

    Removes every ``<think>…</think>`` block; text before a lone ``</think>`` (servers that put the
    opening tag in the prompt); and everything after an unclosed ``<think>`` (an answer cut off
    while still reasoning has no answer in it).
    """
    text = _THINK_BLOCK.sub("", text)
    closing = list(_THINK_CLOSE.finditer(text))
    if closing:
        text = text[closing[-1].end() :]
    opening = _THINK_OPEN.search(text)
    if opening:
        text = text[: opening.start()]
    return text.strip()


class ThinkFilter:
    """``strip_think`` for a stream: feed pieces, get back the text outside ``<think>`` blocks.

    A tag split across pieces is held back until it is complete.  Text before a lone
    ``</think>`` cannot be withdrawn once sent, so a stream is assumed to open its reasoning
    with ``<think>`` (as the reasoning models that stream do).
    """

    def __init__(self) -> None:
        self._held = ""
        self._thinking = False

    def feed(self, piece: str) -> str:
        """The part of ``piece`` (with what was held back) that may be shown now."""
        text, out = self._held + piece, []
        self._held = ""
        while text:
            tag = "</think>" if self._thinking else "<think>"
            at = text.lower().find(tag)
            if at < 0:
                keep = _partial_tag(text, tag)
                if not self._thinking:
                    out.append(text[: len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            if not self._thinking:
                out.append(text[:at])
            text = text[at + len(tag) :]
            self._thinking = not self._thinking
        return "".join(out)

    def flush(self) -> str:
        """What was held back at the end of the stream (nothing inside an open block)."""
        held, self._held = self._held, ""
        return "" if self._thinking else held


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` could begin ``tag``."""
    lowered = text.lower()
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(lowered[-size:]):
            return size
    return 0
