"""The request bodies of the MemOS product API (``/product/*``, ``routes.product``).

They follow MemOS's published request models (``APIADDRequest``, ``APISearchRequest``, its
feedback and get-memory requests) by field name, so a MemOS plugin's request is accepted as it
is: fields memstrata does not honour are accepted and ignored (``extra="ignore"``), and
docs/memos-compat.md lists which are honoured.  Bounds are left to the core (every value passes
through one ``MemoryOS`` call that checks it), so a refusal here and there is the same 422.
Responses are MemOS's envelope, ``{"code", "message", "data"}``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Product(BaseModel):
    # MemOS clients send many fields memstrata has no use for (mode, dedup, internet_search…):
    # accepted and ignored, never a 422 that would break a plugin.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    user_id: str | None = Field(
        default=None,
        description="The user acted for: the caller's own id, or (for an admin) another's.",
    )
    mem_cube_id: str | None = Field(default=None, description="The cube (MemOS's older field).")
    session_id: str | None = None


class ProductAddIn(_Product):
    """``/product/add``: messages (OpenAI chat format: text, parts, tool calls and results)."""

    writable_cube_ids: list[str] | None = Field(
        default=None, description="The cubes to add to (the first is used)."
    )
    messages: list[dict[str, Any]] | str | None = None
    memory_content: str | None = Field(default=None, description="One text to store.")
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="OpenAI tool definitions: stored as the tools' schemas."
    )
    is_feedback: bool = Field(
        default=False, description="The last user message is feedback (``/product/feedback``)."
    )


class ProductSearchIn(_Product):
    """``/product/search``: one query, six buckets."""

    query: str
    readable_cube_ids: list[str] | None = None
    top_k: int = 10
    include_preference: bool = True
    pref_top_k: int = 6
    search_tool_memory: bool = True
    tool_mem_top_k: int = 6
    include_skill_memory: bool = True
    skill_mem_top_k: int = 3


class ProductFeedbackIn(_Product):
    """``/product/feedback``: a correction, confirmation or rejection, and how a task ended."""

    writable_cube_ids: list[str] | None = None
    feedback_content: str
    retrieved_memory_ids: list[str] | None = None
    corrected_answer: str | None = None
    task_outcome: str | None = Field(
        default=None,
        description="success or failure: how the session's task ended (skill memory); "
        "without it, a confirmation of a session is a success and a rejection a failure.",
    )


class ProductGetIn(_Product):
    """``/product/get_memory``: a page of a cube's memories, by bucket."""

    readable_cube_ids: list[str] | None = None
    memory_type: str | None = Field(
        default=None, description="text_mem, pref_mem, tool_mem or skill_mem (default: all)."
    )
    page: int = 1
    page_size: int = 100


class ProductOut(BaseModel):
    """MemOS's response envelope."""

    code: int = 200
    message: str
    data: Any = None
