"""LLM calls and tokens counted per cube (DESIGN §8), kept in the ``llm_usage`` table.

``record`` adds one completion to a cube's running totals inside one write transaction, so
concurrent workers (threads or processes) never lose a count.  Thread-safe as the store is.
"""

from __future__ import annotations

import time
from typing import TypedDict

from memstrata.llm.base import Completion
from memstrata.store.sqlite.store import SQLiteStore


class LLMUsage(TypedDict):
    """A cube's totals: chat calls made, prompt tokens sent, completion tokens received."""

    calls: int
    prompt_tokens: int
    completion_tokens: int


_UPSERT = """
INSERT INTO llm_usage (cube_id, calls, prompt_tokens, completion_tokens, updated_at)
VALUES (?, 1, ?, ?, ?)
ON CONFLICT (cube_id) DO UPDATE SET
    calls = calls + 1,
    prompt_tokens = prompt_tokens + excluded.prompt_tokens,
    completion_tokens = completion_tokens + excluded.completion_tokens,
    updated_at = excluded.updated_at
"""


def record(store: SQLiteStore, cube_id: str, completion: Completion) -> None:
    """Count ``completion`` (one call and its tokens) against ``cube_id``; raises ``StorageError``."""
    with store.transaction() as conn:
        conn.execute(
            _UPSERT,
            (cube_id, completion.prompt_tokens, completion.completion_tokens, time.time()),
        )


def usage(store: SQLiteStore, cube_id: str) -> LLMUsage:
    """``cube_id``'s totals so far (zeros for a cube that never used an LLM)."""
    row = (
        store.reader()
        .execute(
            "SELECT calls, prompt_tokens, completion_tokens FROM llm_usage WHERE cube_id = ?",
            (cube_id,),
        )
        .fetchone()
    )
    if row is None:
        return LLMUsage(calls=0, prompt_tokens=0, completion_tokens=0)
    return LLMUsage(calls=row[0], prompt_tokens=row[1], completion_tokens=row[2])
