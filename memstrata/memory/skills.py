"""Skill memory: how a task was done, distilled from a run that ended well, reused by the next.

``MemoryOS.end_task(session_id=…, outcome=…)`` says how a task (the turns and tool calls of one
session, ``memory.tools``) ended: the caller's success signal, or its end; ``/product/feedback``
sends it for feedback that confirms or rejects.  Offline, by a template over the trajectory:

* **success** distils a ``skill`` item (long tier): the *goal* (``goal=``, else the session's
  first user turn), *preconditions* (the tools it needs, the inputs its first call took),
  *steps* (each successful call in order: the tool, its argument pattern, an example), *pitfalls*
  (the calls that failed, with their errors), *evidence* (the turns' and calls' ids).  Its text
  ("Skill: … Steps: 1. … Pitfalls: …") is what a new task's description finds
  (``search(include=["skill"])``).
* A later success of the **same goal** (the same tools in the same order, ``key``, and a goal
  whose embedding is within ``SAME_GOAL_COSINE`` of one of the skill's) is not a new skill: it is
  the next *version* of the same item, which keeps every phrasing of the goal, counts the run,
  and takes the new run's steps when they are better (fewer failed calls, then fewer steps).
* **failure** demotes the skills the run followed (``skill_ids=``, else those of the same goal
  as above): their confidence becomes successes / runs, and once failures reach successes the
  skill is ``archived``, out of search (``include=["skill", "archived"]`` still finds it).

Each change is a version with an event (``update``, ``demote``, ``archive``), so ``history``
shows a skill's runs and ``rollback`` undoes one.  Skills are items: exported and imported with
the cube, erased with their session or user, listed by the inspector's type filter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from memstrata.errors import ValidationError
from memstrata.filters import Filters
from memstrata.limits import (
    MAX_FEEDBACK_TARGETS,
    MAX_QUERY_CHARS,
    MAX_SKILL_STEPS,
    MAX_TASK_ITEMS,
    check_text,
)
from memstrata.memory.access import check_id
from memstrata.memory.components import Components
from memstrata.memory.items import Items
from memstrata.memory.tools import argument_pattern
from memstrata.model import MemoryItem, new_id, utcnow

Outcome = Literal["success", "failure"]
OUTCOMES: tuple[str, ...] = ("success", "failure")
#: Two goals are the same task when their embeddings are this close (e5: a paraphrase of a
#: task scores above it, another task with the same tools below; bench/skill_memory.py).
SAME_GOAL_COSINE = 0.88
#: Phrasings of a goal a skill keeps (its text holds them all, so each finds it).
MAX_GOALS = 5
#: Characters of a goal kept.
GOAL_CHARS = 300
#: Characters of a step's example arguments kept (as JSON).
EXAMPLE_CHARS = 400
#: Ids of evidence a skill keeps.
MAX_EVIDENCE = 100


class Skills:
    """``MemoryOS.end_task`` (see the module docs)."""

    def __init__(self, parts: Components, items: Items) -> None:
        self._parts = parts
        self._store = parts.store
        self._access = parts.access
        self._items = items

    def end_task(
        self,
        *,
        user_id: str,
        cube_id: str,
        session_id: str,
        outcome: str = "success",
        goal: str | None = None,
        skill_ids: Sequence[str] | None = None,
    ) -> list[MemoryItem]:
        """Record how the task of ``session_id`` in ``cube_id`` ended (needs ``write``); a
        ``goal`` is a client's text (``check_text``, at most ``MAX_QUERY_CHARS``).

        ``success``: the skill distilled (new, or the next version of the same goal's);
        ``failure``: the skills demoted (``skill_ids``, else the same goal's).  Returns the
        skills written; none when a successful run called no tool (nothing to learn)."""
        if outcome not in OUTCOMES:
            raise ValidationError(f"outcome must be one of {', '.join(OUTCOMES)}")
        check_id(session_id, "session_id")
        if goal is not None and (not isinstance(goal, str) or not goal.strip()):
            raise ValidationError("goal must be a non-empty string")
        if goal is not None:  # the one rule for a client's text: a NUL never reaches the store
            check_text(goal, "goal", MAX_QUERY_CHARS)
        cube = self._access.writable_cube(user_id, cube_id)
        steps = self._trajectory(cube.cube_id, session_id)
        calls = [i for i in steps if i.type == "tool_call"]
        named = generalise(_goal(goal, steps), calls)
        if outcome == "failure":
            if skill_ids is not None and not isinstance(skill_ids, (list, tuple)):
                raise ValidationError("skill_ids must be a list of item ids")
            if skill_ids is not None and len(skill_ids) > MAX_FEEDBACK_TARGETS:
                raise ValidationError(
                    f"skill_ids names {len(skill_ids)} items; at most {MAX_FEEDBACK_TARGETS} are allowed"
                )
            named_ids = None if skill_ids is None else list(skill_ids)
            for skill_id in named_ids or ():
                check_id(skill_id, "skill_ids")
            return self._demote(cube.cube_id, user_id, calls, named, named_ids)
        if not any(c.metadata.get("status") == "success" for c in calls) or not named:
            return []
        return [self._learn(cube.cube_id, user_id, session_id, steps, calls, named)]

    def _trajectory(self, cube_id: str, session_id: str) -> list[MemoryItem]:
        wanted = Filters(session_id=session_id, types=("turn", "tool_call"))
        return self._store.list_items(cube_id, wanted, limit=MAX_TASK_ITEMS)

    def _learn(
        self,
        cube_id: str,
        user_id: str,
        session_id: str,
        steps: list[MemoryItem],
        calls: list[MemoryItem],
        goal: str,
    ) -> MemoryItem:
        run = distil(goal, steps, calls)
        same = self._same_goal(cube_id, run["key"], goal, archived=False)
        if same is None:
            item = _new_skill(cube_id, user_id, session_id, run)
            self._items._store_new([item])  # embeds, writes and indexes, as every add
            return self._store.get_items([item.id], [cube_id])[0]
        old = same.metadata
        was = (int(old.get("failures_met", 0)), len(old.get("steps", [])))
        better = (run["failures"], len(run["steps"])) < was
        goals = list(dict.fromkeys([*old.get("goals", []), goal]))[-MAX_GOALS:]
        metadata = {
            **old,
            **({k: run[k] for k in ("steps", "preconditions", "pitfalls")} if better else {}),
            "failures_met": run["failures"] if better else old.get("failures_met", 0),
            "goals": goals,
            "successes": int(old.get("successes", 1)) + 1,
            "evidence": (list(old.get("evidence", [])) + run["evidence"])[-MAX_EVIDENCE:],
        }
        text = skill_text(goals, metadata["steps"], metadata["pitfalls"])
        new = replace(same, text=text, metadata=metadata, confidence=_confidence(metadata))
        reason = "skill: a better run" if better else "skill: another run"
        return self._items.write_version(same, new, user_id, "update", reason)

    def _demote(
        self,
        cube_id: str,
        user_id: str,
        calls: list[MemoryItem],
        goal: str,
        skill_ids: list[str] | None,
    ) -> list[MemoryItem]:
        if skill_ids is not None:
            found = self._store.get_items(skill_ids, [cube_id])
            targets = [i for i in found if i.type == "skill" and i.cube_id == cube_id]
        else:
            key = signature(calls, attempted=True)
            same = self._same_goal(cube_id, key, goal, archived=False) if goal else None
            targets = [] if same is None else [same]
        done = []
        for skill in targets:
            if skill.status not in ("generated", "activated"):
                continue
            metadata = {**skill.metadata, "failures": int(skill.metadata.get("failures", 0)) + 1}
            archive = metadata["failures"] >= int(metadata.get("successes", 1))
            demoted = replace(
                skill,
                metadata=metadata,
                confidence=_confidence(metadata),
                status="archived" if archive else skill.status,
            )
            op = "archive" if archive else "demote"
            done.append(
                self._store.update_item(demoted, None, op=op, actor=user_id, reason="skill failed")
            )
        return done

    def _same_goal(self, cube_id: str, key: str, goal: str, *, archived: bool) -> MemoryItem | None:
        """The cube's skill of the same tools (``key``) whose goals come closest to ``goal``,
        when within ``SAME_GOAL_COSINE``."""
        statuses = (
            ("generated", "activated", "archived") if archived else ("generated", "activated")
        )
        wanted = Filters(types=("skill",), statuses=statuses)
        found = [s for s in self._store.list_items(cube_id, wanted) if s.key == key]
        if not found:
            return None
        phrasings = [(s, g) for s in found for g in s.metadata.get("goals", [s.text])]
        vectors = self._parts.embedder.embed_passages([goal, *(g for _, g in phrasings)])
        vectors = np.asarray(vectors, dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        scores = vectors[1:] @ vectors[0]
        best = int(np.argmax(scores))
        return phrasings[best][0] if scores[best] >= SAME_GOAL_COSINE else None


def outcome_of(kind: str) -> str | None:
    """The outcome a piece of feedback on a task says (``/product/feedback``): a confirmation is
    a success, a rejection a failure, a correction or a request to forget neither."""
    return {"confirm": "success", "invalidate": "failure"}.get(kind)


def distil(goal: str, steps: list[MemoryItem], calls: list[MemoryItem]) -> dict[str, Any]:
    """A run's skill by template (see the module docs): goal, key, preconditions, steps,
    pitfalls, failures and evidence."""
    good = [c for c in calls if c.metadata.get("status") == "success"]
    failed = [c for c in calls if c.metadata.get("status") == "error"]
    made: list[dict[str, Any]] = []
    for call in good:
        step = {
            "tool": str(call.metadata.get("tool")),
            "arguments": argument_pattern(dict(call.metadata.get("arguments") or {})),
            "example": _example(call.metadata.get("arguments")),
        }
        if made and (made[-1]["tool"], made[-1]["arguments"]) == (step["tool"], step["arguments"]):
            continue  # the same step again (a retry, a page) is one step
        made.append(step)
    made = made[:MAX_SKILL_STEPS]
    pitfalls = [
        f"{c.metadata.get('tool')}: {str(c.metadata.get('error', ''))[:160]}" for c in failed
    ][:MAX_SKILL_STEPS]
    tools = list(dict.fromkeys(s["tool"] for s in made))
    first = made[0]["arguments"] if made else {}
    return {
        "goal": goal,
        "goals": [goal],
        "key": signature(good),
        "preconditions": [f"tools: {', '.join(tools)}", f"inputs: {', '.join(first) or 'none'}"],
        "steps": made,
        "pitfalls": pitfalls,
        "failures": len(failed),
        "evidence": [i.id for i in steps][:MAX_EVIDENCE],
    }


def generalise(goal: str, calls: Sequence[MemoryItem]) -> str:
    """``goal`` with the argument values of its calls named by their keys ("Book a flight to
    <city>"): the skill is the pattern, not this run's values, and a run with other values is
    the same goal."""
    values = {
        str(v): str(k)
        for c in calls
        for k, v in dict(c.metadata.get("arguments") or {}).items()
        if isinstance(v, str) and 3 <= len(v) <= GOAL_CHARS // 4
    }
    for value in sorted(values, key=len, reverse=True):
        pattern = re.compile(rf"(?<!\w){re.escape(value)}(?!\w)", re.IGNORECASE)
        goal = pattern.sub(f"<{values[value]}>", goal)
    return goal


def signature(calls: Sequence[MemoryItem], *, attempted: bool = False) -> str:
    """A run's key: the tools it called successfully (``attempted``: at all; a failed run is
    matched by what it tried), in the order first used."""
    good = [c for c in calls if attempted or c.metadata.get("status", "success") == "success"]
    return "skill:" + "+".join(dict.fromkeys(str(c.metadata.get("tool")) for c in good))


def skill_text(
    goals: Sequence[str], steps: Sequence[dict[str, Any]], pitfalls: Sequence[str]
) -> str:
    """What a skill reads as, and is found by."""
    lines = ["Skill: " + " / ".join(goals)]
    shown = [f"{n}. {s['tool']}({', '.join(s['arguments'])})" for n, s in enumerate(steps, 1)]
    lines.append("Steps: " + " ".join(shown))
    if pitfalls:
        lines.append("Pitfalls: " + "; ".join(pitfalls))
    return "\n".join(lines)


def _new_skill(cube_id: str, user_id: str, session_id: str, run: dict[str, Any]) -> MemoryItem:
    now = utcnow()
    metadata = {
        "goals": run["goals"],
        "preconditions": run["preconditions"],
        "steps": run["steps"],
        "pitfalls": run["pitfalls"],
        "failures_met": run["failures"],
        "evidence": run["evidence"],
        "successes": 1,
        "failures": 0,
    }
    return MemoryItem(
        id=new_id(),
        cube_id=cube_id,
        text=skill_text(run["goals"], run["steps"], run["pitfalls"]),
        tier="long",
        type="skill",
        status="activated",
        session_id=session_id,
        user_id=user_id,
        key=run["key"],
        metadata=metadata,
        confidence=1.0,
        event_time=now,
        created_at=now,
        updated_at=now,
    )


def _goal(given: str | None, steps: list[MemoryItem]) -> str:
    if given is not None:
        return " ".join(given.split())[:GOAL_CHARS]
    asked = [i for i in steps if i.type == "turn" and i.role == "user"]
    return " ".join(asked[0].text.split())[:GOAL_CHARS] if asked else ""


def _example(arguments: object) -> dict[str, Any]:
    """A call's arguments as a step's example: as stored when small, else none."""
    if not isinstance(arguments, dict):
        return {}
    return arguments if len(json.dumps(arguments, ensure_ascii=False)) <= EXAMPLE_CHARS else {}


def _confidence(metadata: dict[str, Any]) -> float:
    successes = int(metadata.get("successes", 1))
    return round(successes / max(1, successes + int(metadata.get("failures", 0))), 4)
