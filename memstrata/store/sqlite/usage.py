"""``UsageStore`` over the ``llm_usage`` table: LLM calls and tokens counted per cube (DESIGN §8).

``record_usage`` adds one call to a cube's running totals inside one write transaction, so
concurrent workers (threads or processes) never lose a count.
"""

from __future__ import annotations

import time

from memstrata.model import LLMUsage
from memstrata.store.sqlite.connection import SQLiteDatabase

__all__ = ["SQLiteUsage"]

_UPSERT = """
INSERT INTO llm_usage (cube_id, calls, prompt_tokens, completion_tokens, updated_at)
VALUES (?, 1, ?, ?, ?)
ON CONFLICT (cube_id) DO UPDATE SET
    calls = calls + 1,
    prompt_tokens = prompt_tokens + excluded.prompt_tokens,
    completion_tokens = completion_tokens + excluded.completion_tokens,
    updated_at = excluded.updated_at
"""


class SQLiteUsage(SQLiteDatabase):
    """``UsageStore``: per-cube LLM totals.  Thread- and process-safe."""

    def record_usage(self, cube_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one LLM call and its tokens against ``cube_id``; raises ``StorageError``."""
        with self.transaction() as conn:
            conn.execute(_UPSERT, (cube_id, prompt_tokens, completion_tokens, time.time()))

    def llm_usage(self, cube_id: str) -> LLMUsage:
        """``cube_id``'s totals so far (zeros for a cube that never used an LLM)."""
        row = (
            self.reader()
            .execute(
                "SELECT calls, prompt_tokens, completion_tokens FROM llm_usage WHERE cube_id = ?",
                (cube_id,),
            )
            .fetchone()
        )
        if row is None:
            return LLMUsage(calls=0, prompt_tokens=0, completion_tokens=0)
        return LLMUsage(calls=row[0], prompt_tokens=row[1], completion_tokens=row[2])
