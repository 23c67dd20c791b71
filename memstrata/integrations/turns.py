"""A framework's chat message as a turn ``MemoryOS.add`` takes: what flows into memory.

``turn_of`` reads a LangChain message object or a message dict (``type`` or ``role``,
``content`` as text or a list of text blocks, ``id``, ``name``) and returns an ``add`` message
whose ``id`` (stored as the turn's ``external_id``) is the message's, prefixed ``lg:``, so the
same message added twice is one turn.  Messages without an id or text, and tool results (the
tools' output, not the conversation), do not flow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memstrata.limits import MAX_EXTERNAL_ID

#: Message types (LangChain's, and the roles of message dicts) that flow, and their roles.
ROLES = {"human": "user", "ai": "assistant", "system": "system"}
ROLES.update({role: role for role in ROLES.values()})


def turn_of(message: Any) -> dict[str, Any] | None:
    """``message`` as an ``add`` message, or None when it does not flow (see the module docs)."""
    get: Callable[[str], Any] = (
        message.get if isinstance(message, dict) else lambda key: getattr(message, key, None)
    )
    message_id, kind = get("id"), get("type") or get("role")
    role = ROLES.get(str(kind or "human"))
    content = _text(get("content"))
    if not message_id or role is None or not content.strip():
        return None
    turn: dict[str, Any] = {
        "id": f"lg:{message_id}"[:MAX_EXTERNAL_ID],
        "role": role,
        "content": content,
    }
    if get("name"):
        turn["name"] = str(get("name"))
    return turn


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a list, one per line."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        b if isinstance(b, str) else str(b.get("text", ""))
        for b in content
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
    )
