"""The knowledge-update suite: ``memstrata eval updates`` (docs/evaluation.md).

Each story of ``eval.stories`` is added session by session, through the SDK calls an outside
check uses, to its own cube of its own user (named as the story's person); after
``MemoryOS.wait`` it is asked its two questions.  Per story, as 0 or 1:

* ``new_above_old``: for the present question, the turn stating the current value is among
  the top 10 search hits and ranks above the turn stating the value before (absent: below);
* ``context_new``: the 300-token context of the present question holds the current value;
* ``old_marked``: every line of that context holding the value before (and not the current
  one) is marked as past (``until``); counted only where such a line is present
  (``old_shown`` counts those stories);
* ``profile_current``: some profile attribute's value names the current value and none names
  the value before;
* ``past_old``: the 300-token context of the past question holds the value before;
* ``past_rank``: the turn stating the value before is among the top 10 hits of the past question.

Supersession is scored on the long tier: an item that stopped holding (``valid_to`` set) is
**right** when it names a value of its story that was replaced (in a story that changes back,
the first value was replaced too: that a current value was wrongly closed shows in
``profile_current``);
``supersession_precision`` is the share of right ones among all, ``supersession_recall`` the
share of stories where some item naming the value before (and not the current one) was closed.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstrata.eval.stories import HALVES, Story, stories
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem

TOP_K = 10
BUDGET = 300
#: Long-tier items listed per call.
PAGE = 100
METRICS = ("new_above_old", "context_new", "old_marked", "profile_current", "past_old",
           "past_rank")  # fmt: skip


def names(text: str, value: str) -> bool:
    """Whether ``text`` names ``value`` (whole words, any case)."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE) is not None


def evaluate(
    open_memory: Callable[[str], MemoryOS],
    halves: tuple[str, ...] = HALVES,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run every story of ``halves`` in one fresh memory (``open_memory(path)``); the figures
    per half and overall, and each story's marks."""
    chosen = stories(halves)
    step = progress or (lambda n, total: None)
    step(0, len(chosen))
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, open_memory(str(Path(folder) / "u.db")) as mos:
        cubes = [_ingest(mos, story) for story in chosen]
        ingest_s = time.perf_counter() - start
        for story, cube in zip(chosen, cubes, strict=True):
            rows.append(_ask(mos, story, cube))
            step(1, len(chosen))
    return {
        "halves": {half: summary([r for r in rows if r["half"] == half]) for half in halves},
        "overall": summary(rows),
        "stories": rows,
        "run": {
            "stories": len(chosen),
            "kinds": len({s.kind for s in chosen}),
            "ingest_s": round(ingest_s, 1),
        },
    }


def _ingest(mos: MemoryOS, story: Story) -> str:
    user = f"u-{story.id}"
    mos.create_user(user, name=story.name)
    cube = mos.create_cube(f"c-{story.id}", owner=user).cube_id
    for n, session in enumerate(story.sessions):
        mos.add([dict(m) for m in session], user_id=user, cube_id=cube, session_id=f"s{n}")
    mos.wait(cube)
    return cube


def _ask(mos: MemoryOS, story: Story, cube: str) -> dict[str, Any]:
    user = f"u-{story.id}"
    new_turn, old_turn = story.statements[-1], story.statements[-2]
    ranked = _ranked(mos, story.present, user, cube)
    context = mos.context(story.present, user_id=user, cube_ids=[cube], budget_tokens=BUDGET)
    stale = [
        line
        for line in context.text.splitlines()
        if names(line, story.previous) and not names(line, story.current)
    ]
    profile = mos.get_profile(user_id=user, cube_id=cube)
    values = [a.value for a in profile]
    past = mos.context(story.past, user_id=user, cube_ids=[cube], budget_tokens=BUDGET)
    closed, right, recalled = _superseded(mos, story, user, cube)
    row: dict[str, Any] = {
        "story": story.id,
        "half": story.half,
        "kind": story.kind,
        "new_above_old": int(
            new_turn in ranked
            and (old_turn not in ranked or ranked.index(new_turn) < ranked.index(old_turn))
        ),
        "context_new": int(names(context.text, story.current)),
        "old_shown": int(bool(stale)),
        "old_marked": int(all("until" in line for line in stale)) if stale else None,
        "profile_current": int(
            any(_same(v, story.current) for v in values)
            and not any(_same(v, story.previous) for v in values)
        ),
        "past_old": int(names(past.text, story.previous)),
        "past_rank": int(old_turn in _ranked(mos, story.past, user, cube)),
        "superseded": closed,
        "superseded_right": right,
        "superseded_recall": int(recalled),
        "profile": [f"{a.key}={a.value}" for a in profile],
    }
    return row


def _ranked(mos: MemoryOS, question: str, user: str, cube: str) -> list[str | None]:
    hits = mos.search(question, user_id=user, cube_ids=[cube], top_k=TOP_K)
    return [h.item.external_id for h in hits]


def _same(stored: str, value: str) -> bool:
    """Whether a profile value names ``value`` (or is a part of it: "Civic" of "Honda Civic")."""
    stored = stored.strip()
    return len(stored) >= 3 and (names(stored, value) or names(value, stored))


def _superseded(mos: MemoryOS, story: Story, user: str, cube: str) -> tuple[int, int, bool]:
    """(items closed, of them right, whether one naming the value before was closed)."""
    closed: list[MemoryItem] = []
    offset = 0
    while True:
        page = mos.list_memories(cube, user_id=user, filters={"tier": "long"}, limit=PAGE,
                                 offset=offset)  # fmt: skip
        closed += [i for i in page if i.valid_to is not None and i.type != "segment"]
        if len(page) < PAGE:
            break
        offset += PAGE
    right = [i for i in closed if any(names(i.text, v) for v in story.values[:-1])]
    recalled = any(
        names(i.text, story.previous) and not names(i.text, story.current) for i in right
    )
    return len(closed), len(right), recalled


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The share of 1s of each metric over ``rows`` (where it applies), and supersession
    precision and recall."""
    out: dict[str, Any] = {"stories": len(rows)}
    for metric in METRICS:
        marks = [r[metric] for r in rows if r[metric] is not None]
        out[metric] = round(sum(marks) / len(marks), 3) if marks else None
    out["old_shown"] = sum(r["old_shown"] for r in rows)
    closed = sum(r["superseded"] for r in rows)
    out["supersession_precision"] = (
        round(sum(r["superseded_right"] for r in rows) / closed, 3) if closed else None
    )
    out["supersession_recall"] = (
        round(sum(r["superseded_recall"] for r in rows) / len(rows), 3) if rows else None
    )
    return out


def table(result: dict[str, Any]) -> list[str]:
    """The result as aligned lines: one row per half and overall."""
    columns = [*METRICS, "old_shown", "supersession_precision", "supersession_recall"]
    head = f"{'half':<8} {'stories':>7} " + " ".join(f"{c:>{max(9, len(c))}}" for c in columns)
    lines = [head]
    groups = {**result["halves"], "overall": result["overall"]}
    for name, figures in groups.items():
        cells = []
        for c in columns:
            value = figures.get(c)
            text = (
                "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
            )
            cells.append(f"{text:>{max(9, len(c))}}")
        lines.append(f"{name:<8} {figures['stories']:>7} " + " ".join(cells))
    return lines
