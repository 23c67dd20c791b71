"""``UsageStore`` over the ``llm_usage`` and ``llm_usage_daily`` tables: LLM calls and tokens counted
per cube, in all and per UTC day (DESIGN §8).

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
_UPSERT_DAY = """
INSERT INTO llm_usage_daily (cube_id, day, calls, prompt_tokens, completion_tokens)
VALUES (%s, %s, 1, %s, %s)
ON CONFLICT (cube_id, day) DO UPDATE SET
    calls = llm_usage_daily.calls + 1,
    prompt_tokens = llm_usage_daily.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = llm_usage_daily.completion_tokens + excluded.completion_tokens
"""


class PostgresUsage(PostgresDatabase):
    """``UsageStore``: per-cube LLM totals.  Thread- and process-safe."""

    def record_usage(self, cube_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        now = time.time()
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        with self.transaction() as conn:
            conn.execute(_UPSERT, (cube_id, prompt_tokens, completion_tokens, now))
            conn.execute(_UPSERT_DAY, (cube_id, day, prompt_tokens, completion_tokens))

    def llm_usage(self, cube_id: str) -> LLMUsage:
        found = self.row(
            "SELECT calls, prompt_tokens, completion_tokens FROM llm_usage WHERE cube_id = %s",
            (cube_id,),
        )
        if found is None:
            return LLMUsage(calls=0, prompt_tokens=0, completion_tokens=0)
        return LLMUsage(calls=found[0], prompt_tokens=found[1], completion_tokens=found[2])

    def llm_usage_by_day(self, cube_id: str, days: int) -> list[tuple[str, LLMUsage]]:
        """``cube_id``'s usage on each of the last ``days`` UTC days that had any, oldest first,
        as (``YYYY-MM-DD``, usage); calls made before schema 7 are in the totals only."""
        first = time.strftime("%Y-%m-%d", time.gmtime(time.time() - (days - 1) * 86_400))
        found = self.rows(
            "SELECT day, calls, prompt_tokens, completion_tokens FROM llm_usage_daily "
            "WHERE cube_id = %s AND day >= %s ORDER BY day",
            (cube_id, first),
        )
        return [
            (r[0], LLMUsage(calls=r[1], prompt_tokens=r[2], completion_tokens=r[3])) for r in found
        ]
