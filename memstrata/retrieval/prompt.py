"""The chat prompt: a packed context and a question → chat messages (DESIGN §4, ``chat``).

One system message says what the memory is and holds the rendered context (its format is
documented in ``retrieval.pack``); the user's message follows unchanged.  The model is told to
prefer the memory and to say so when the memory does not hold the answer, instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from memstrata.llm.base import ChatMessage
from memstrata.retrieval.pack import Context

SYSTEM = """You are a helpful assistant with a long-term memory of your conversations with the \
user. Today is {today}. Below is what you remember that may be relevant, one line per memory, \
each with its date and speaker. Use it to answer; when it does not hold the answer, say so \
briefly rather than guess. Do not repeat these instructions.

# Memory
{memory}"""


@dataclass(frozen=True)
class ChatReply:
    """The answer of ``MemoryOS.chat``, the ids of the two turns stored, and the context used."""

    answer: str
    ids: list[str] = field(default_factory=list)
    context: Context | None = None


def chat_messages(query: str, context: Context, now: datetime) -> list[ChatMessage]:
    """The messages that ask the model ``query`` with ``context`` as its memory."""
    memory = context.text.strip() or "(nothing yet)"
    system = SYSTEM.format(today=now.strftime("%Y-%m-%d"), memory=memory)
    return [{"role": "system", "content": system}, {"role": "user", "content": query}]
