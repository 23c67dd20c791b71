"""``UsageStore`` over the ``llm_usage`` and ``llm_usage_daily`` tables: LLM calls and tokens counted
per cube, in all and per UTC day (DESIGN §8).

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
_UPSERT_DAY = """
INSERT INTO llm_usage_daily (cube_id, day, calls, prompt_tokens, completion_tokens)
VALUES (?, ?, 1, ?, ?)
ON CONFLICT (cube_id, day) DO UPDATE SET
    calls = llm_usage_daily.calls + 1,
    prompt_tokens = llm_usage_daily.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = llm_usage_daily.completion_tokens + excluded.completion_tokens
"""


class SQLiteUsage(SQLiteDatabase):
    """``UsageStore``: per-cube LLM totals.  Thread- and process-safe."""

    def record_usage(self, cube_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one LLM call and its tokens against ``cube_id``; raises ``StorageError``."""
        now = time.time()
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        with self.transaction() as conn:
            conn.execute(_UPSERT, (cube_id, prompt_tokens, completion_tokens, now))
            conn.execute(_UPSERT_DAY, (cube_id, day, prompt_tokens, completion_tokens))

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

    def llm_usage_by_day(self, cube_id: str, days: int) -> list[tuple[str, LLMUsage]]:
        """``cube_id``'s usage on each of the last ``days`` UTC days that had any, oldest first,
        as (``YYYY-MM-DD``, usage); calls made before schema 7 are in the totals only."""
        first = time.strftime("%Y-%m-%d", time.gmtime(time.time() - (days - 1) * 86_400))
        found = self.reader().execute(
            "SELECT day, calls, prompt_tokens, completion_tokens FROM llm_usage_daily "
            "WHERE cube_id = ? AND day >= ? ORDER BY day",
            (cube_id, first),
        )
        return [
            (r[0], LLMUsage(calls=r[1], prompt_tokens=r[2], completion_tokens=r[3])) for r in found
        ]
