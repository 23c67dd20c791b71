"""``UsageStore`` over the ``llm_usage`` table: LLM calls and tokens counted per cube (DESIGN §8).

One upsert per call adds to the cube's running totals; PostgreSQL's row lock makes concurrent
workers (threads or processes) queue on it, so no count is lost.
"""

from __future__ import annotations

import time

from memstrata.model import LLMUsage
from memstrata.store.postgres.connection import PostgresDatabase

_UPSERT = """
INSERT INTO llm_usage (cube_id, calls, prompt_tokens, completion_tokens, updated_at)
VALUES (%s, 1, %s, %s, %s)
ON CONFLICT (cube_id) DO UPDATE SET
    calls = llm_usage.calls + 1,
    prompt_tokens = llm_usage.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = llm_usage.completion_tokens + excluded.completion_tokens,
    updated_at = excluded.updated_at
"""


class PostgresUsage(PostgresDatabase):
    """``UsageStore``: per-cube LLM totals.  Thread- and process-safe."""

    def record_usage(self, cube_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self.transaction() as conn:
            conn.execute(_UPSERT, (cube_id, prompt_tokens, completion_tokens, time.time()))

    def llm_usage(self, cube_id: str) -> LLMUsage:
        found = self.row(
            "SELECT calls, prompt_tokens, completion_tokens FROM llm_usage WHERE cube_id = %s",
            (cube_id,),
        )
        if found is None:
            return LLMUsage(calls=0, prompt_tokens=0, completion_tokens=0)
        return LLMUsage(calls=found[0], prompt_tokens=found[1], completion_tokens=found[2])
