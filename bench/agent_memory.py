"""Tool and skill memory on synthetic agent traces (memstrata.eval.agents; docs/evaluation.md).

    .venv/bin/python bench/agent_memory.py [--embedder e5] [--out bench/agent-memory.json]

Writes the figures as JSON: the tool suite's share of questions whose call is in the top 3, the
skill suite's share of third asks answered by the right skill first, the share after five
families failed twice (their skills gone, the others still first), and the families whose
second run became version 2 of their skill.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from memstrata import MemoryOS
from memstrata.eval.agents import FAMILIES, skill_suite, tool_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--out", default="bench/agent-memory.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "agents.db")
        with MemoryOS.open(db, embedder=args.embedder, workers=0) as mos:
            mos.create_user("agent")
            started = time.perf_counter()
            tools = tool_suite(mos, "agent", mos.create_cube("tools", owner="agent").cube_id)
            skills, after, versioned = skill_suite(
                mos, "agent", mos.create_cube("skills", owner="agent").cube_id
            )
            seconds = time.perf_counter() - started
    figures = {
        "embedder": args.embedder,
        "tool_questions": tools.asked,
        "tool_top3": round(tools.share, 3),
        "skill_families": len(FAMILIES),
        "skill_first": round(skills.share, 3),
        "skill_first_after_demotion": round(after.share, 3),
        "skill_version_2": versioned,
        "seconds": round(seconds, 1),
    }
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
