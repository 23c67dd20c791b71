"""``UsageStore`` over the ``llm_usage`` and ``llm_usage_daily`` tables, for both engines: LLM calls
and tokens counted per cube, in all and per UTC day.

One upsert per call adds to the cube's running totals inside one write transaction (SQLite's one
writer, PostgreSQL's row lock), so concurrent workers (threads or processes) never lose a count.
"""

from __future__ import annotations

import time

from memstrata.model import LLMUsage
from memstrata.store.sql.database import SQLDatabase

_TOTAL = (
    "calls = llm_usage.calls + 1, "
    "prompt_tokens = llm_usage.prompt_tokens + excluded.prompt_tokens, "
    "completion_tokens = llm_usage.completion_tokens + excluded.completion_tokens, "
    "updated_at = excluded.updated_at"
)
_DAY = (
    "calls = llm_usage_daily.calls + 1, "
    "prompt_tokens = llm_usage_daily.prompt_tokens + excluded.prompt_tokens, "
    "completion_tokens = llm_usage_daily.completion_tokens + excluded.completion_tokens"
)
_COUNTS = ("calls", "prompt_tokens", "completion_tokens")


class SQLUsage(SQLDatabase):
    """``UsageStore``: per-cube LLM totals.  Thread- and process-safe."""

    def record_usage(self, cube_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        d = self.dialect
        now = time.time()
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        total = d.upsert("llm_usage", ("cube_id", *_COUNTS, "updated_at"), ("cube_id",), _TOTAL)
        daily = d.upsert("llm_usage_daily", ("cube_id", "day", *_COUNTS), ("cube_id", "day"), _DAY)
        with self.transaction() as conn:
            conn.execute(total, (cube_id, 1, prompt_tokens, completion_tokens, now))
            conn.execute(daily, (cube_id, day, 1, prompt_tokens, completion_tokens))

    def llm_usage(self, cube_id: str) -> LLMUsage:
        found = self.row(
            f"SELECT {', '.join(_COUNTS)} FROM llm_usage WHERE cube_id = {self.dialect.mark}",
            (cube_id,),
        )
        if found is None:
            return LLMUsage(calls=0, prompt_tokens=0, completion_tokens=0)
        return LLMUsage(calls=found[0], prompt_tokens=found[1], completion_tokens=found[2])

    def llm_usage_by_day(self, cube_id: str, days: int) -> list[tuple[str, LLMUsage]]:
        """``cube_id``'s usage on each of the last ``days`` UTC days that had any, oldest first,
        as (``YYYY-MM-DD``, usage); calls made before the daily table are in the totals only."""
        m = self.dialect.mark
        first = time.strftime("%Y-%m-%d", time.gmtime(time.time() - (days - 1) * 86_400))
        found = self.rows(
            f"SELECT day, {', '.join(_COUNTS)} FROM llm_usage_daily "
            f"WHERE cube_id = {m} AND day >= {m} ORDER BY day",
            (cube_id, first),
        )
        return [
            (r[0], LLMUsage(calls=r[1], prompt_tokens=r[2], completion_tokens=r[3])) for r in found
        ]
