"""The tool- and skill-memory suites (``memstrata.eval.agents``) meet issue 30's bars on the real
embedder: a past call in the top 3 for at least 0.9 of questions, the right skill first for at
least 0.85 of new asks, and a skill that failed twice out of the ranking."""

from __future__ import annotations

from pathlib import Path

from memstrata import MemoryOS
from memstrata.eval.agents import FAMILIES, TRACES, skill_suite, tool_suite


def test_the_suites_meet_the_bars(tmp_path: Path) -> None:
    with MemoryOS.open(str(tmp_path / "agents.db"), workers=0) as mos:
        mos.create_user("agent")
        tools = tool_suite(mos, "agent", mos.create_cube("tools", owner="agent").cube_id)
        first, after, versioned = skill_suite(
            mos, "agent", mos.create_cube("skills", owner="agent").cube_id
        )
    assert tools.asked == TRACES >= 30 and tools.share >= 0.9
    assert first.asked == len(FAMILIES) >= 20 and first.share >= 0.85
    assert after.share >= 0.85
    assert versioned >= 0.85 * len(FAMILIES)
