"""The PrefEval harness (``memstrata eval prefeval``): does a user's preference reach the context?

PrefEval (Zhao et al., 2025, arXiv:2502.09597) pairs, per topic, a user's preference with a
question whose good answer depends on it, in three forms (``FORMS``): **explicit** (the user
states it), and two implicit ones, **choice-based** (the user picks one of the assistant's
options and says why) and **persona-driven** (a conversation in which it comes up in passing).
For each item and each filler count N, a fresh database gets, in one session, the item's
conversation and then N filler turns (``eval.fillers``), one minute apart from ``START``, as
PrefEval has them (the preference first, the question after the fillers); once the background
work is done the item's question is asked, and:

* ``recall@Ntok`` (N = 500, 1000): the context ``MemoryOS.context`` packs within N tokens holds
  the **evidence turn**, verbatim or as a source of a long-tier item in it (a preference, a
  fact).  The evidence turn is the user's statement (explicit), the user's choice
  (choice-based), or, in a persona-driven conversation (the data does not mark it), the user
  turn closest to the item's ``preference`` by the embedder (``evidence_turn``);
* ``preference_extracted``: a current preference of the long tier cites the evidence turn
  (``MemoryOS.get_preferences``);
* with an LLM, for items with ``mcq_options`` (the same index and question):
  ``mcq_aligned@1000tok``, the model, shown the 1000-token context, the question and the four
  options (turned by a checksum of the question, so that the aligned one, first in the data,
  is not always first), picks the aligned one; the other three violate the preference.  A
  failed call scores 0 and is counted (``llm_errors``), as is an answer naming no option
  (``mcq_unanswered``).

Results are overall, by form, by topic, by filler count and by form and filler count.  PrefEval
is CC BY-NC: read it where it lies, never copy it.
"""

from __future__ import annotations

import json
import logging
import statistics
import tempfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.embed.base import Embedder
from memstrata.errors import LLMError
from memstrata.eval import answers
from memstrata.eval.fillers import Turn, chit_chat, locomo_turns
from memstrata.eval.scoring import Tally, covered
from memstrata.llm.base import LLM
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem

log = logging.getLogger(__name__)

#: The forms of an item, and the folder of the data that holds each.
FORMS = {
    "explicit": "explicit_preference",
    "choice-based": "implicit_preference/choice-based",
    "persona-driven": "implicit_preference/persona-driven",
}
#: The folder of the multiple-choice options (optional).
MCQ = "mcq_options"
FILLERS = (10, 100, 300)
BUDGETS = (500, 1000)
USER = "eval"
START = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)
#: The result's groupings, besides ``overall``: each item is in one group of each.
GROUPINGS = ("by_form", "by_topic", "by_fillers", "by_form_and_fillers")


@dataclass(frozen=True)
class Case:
    """One item of one form: the conversation that states or shows a preference, the question."""

    form: str
    topic: str
    index: int
    preference: str
    question: str
    turns: tuple[Turn, ...]
    #: indices in ``turns`` of the turns that may be the evidence (``evidence_turn`` picks one)
    evidence: tuple[int, ...]
    #: the multiple-choice options, the one aligned with the preference first; () if none
    options: tuple[str, ...] = ()


def load(folder: str | Path, limit: int | None = None) -> list[Case]:
    """The first ``limit`` items (default: all) of each topic file of each form in ``folder``,
    PrefEval's ``benchmark_dataset``; form by form, topic by topic.  ``ValueError`` naming the
    file and what is wrong with it for anything else."""
    root = Path(folder)
    cases: list[Case] = []
    for form, sub in FORMS.items():
        files = sorted((root / sub).glob("*.json"))
        if not files:
            raise ValueError(f"{root}: no {sub}/*.json (expected PrefEval's benchmark_dataset)")
        for path in files:
            mcq = _choices(root / MCQ / path.name)
            for index, item in enumerate(_items(path)[:limit]):
                cases.append(_case(form, path, index, item, mcq))
    return cases


def _items(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path} as JSON: {exc}") from exc
    if not isinstance(data, list) or not data or not all(isinstance(i, dict) for i in data):
        raise ValueError(f"{path}: expected a non-empty JSON list of PrefEval items")
    return data


def _choices(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(question, options) of each item of an ``mcq_options`` file; [] when there is none."""
    if not path.exists():
        return []
    found = []
    for index, item in enumerate(_items(path)):
        options = item.get("classification_task_options")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise ValueError(f"{path}: item {index} has no list of classification_task_options")
        found.append((_text(item, "question", f"{path}: item {index}"), tuple(options)))
    return found


def _case(
    form: str, path: Path, index: int, item: dict[str, Any], mcq: list[tuple[str, tuple[str, ...]]]
) -> Case:
    where = f"{path}: item {index}"
    question = _text(item, "question", where)
    turns, evidence = _CONVERSATIONS[form](item, where)
    same = index < len(mcq) and mcq[index][0] == question  # aligned by index, checked
    return Case(form, path.stem, index, _text(item, "preference", where), question, turns,
                evidence, mcq[index][1] if same else ())  # fmt: skip


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} has no {key!r} text")
    return value


def _conversation(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    value = item.get("conversation")
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{where} has no conversation")
    return value


def _explicit(item: Mapping[str, Any], where: str) -> tuple[tuple[Turn, ...], tuple[int, ...]]:
    """The statement alone, as the user's one turn."""
    return (("user", _text(item, "preference", where)),), (0,)


def _choice(item: Mapping[str, Any], where: str) -> tuple[tuple[Turn, ...], tuple[int, ...]]:
    """The user's query, the assistant's options, the user's choice (the evidence) and the
    assistant's acknowledgment when given."""
    said = _conversation(item, where)
    turns: list[Turn] = [("user", _text(said, "query", where)),
                         ("assistant", _text(said, "assistant_options", where)),
                         ("user", _text(said, "user_selection", where))]  # fmt: skip
    if "assistant_acknowledgment" in said:
        turns.append(("assistant", _text(said, "assistant_acknowledgment", where)))
    return tuple(turns), (2,)


def _persona(item: Mapping[str, Any], where: str) -> tuple[tuple[Turn, ...], tuple[int, ...]]:
    """The exchanges in order, each the user's turn then the assistant's; any user turn may be
    the evidence."""
    said = _conversation(item, where)
    if not all(isinstance(k, str) and k.isdigit() for k in said):
        raise ValueError(f"{where}: the conversation's keys are not exchange numbers")
    turns: list[Turn] = []
    for key in sorted(said, key=int):
        exchange, at = said[key], f"{where}, exchange {key}"
        if not isinstance(exchange, dict):
            raise ValueError(f"{at} is not an object")
        turns += [("user", _text(exchange, "user", at)),
                  ("assistant", _text(exchange, "assistant", at))]  # fmt: skip
    return tuple(turns), tuple(range(0, len(turns), 2))


_CONVERSATIONS: dict[
    str, Callable[[Mapping[str, Any], str], tuple[tuple[Turn, ...], tuple[int, ...]]]
] = {"explicit": _explicit, "choice-based": _choice, "persona-driven": _persona}


def evidence_turn(case: Case, embedder: Embedder) -> int:
    """The index in ``case.turns`` of its evidence turn: the one candidate, or of several the
    one whose passage vector is closest to the preference's (ties: the first)."""
    if len(case.evidence) == 1:
        return case.evidence[0]
    texts = [case.preference, *(case.turns[i][1] for i in case.evidence)]
    vectors = embedder.embed_passages(texts)
    return case.evidence[int(np.argmax(vectors[1:] @ vectors[0]))]


def filler_pool(
    counts: Sequence[int], locomo: Sequence[dict[str, Any]] | None = None
) -> list[Turn]:
    """The filler turns of a run with ``counts``: ``max(counts)`` turns of synthetic small talk,
    or of LoCoMo samples' dialogue when given; ``ValueError`` when the counts are empty,
    negative, or more than the samples hold."""
    _check(counts)
    if locomo is None:
        return chit_chat(max(counts))
    turns = locomo_turns(locomo)
    if len(turns) < max(counts):
        raise ValueError(f"the LoCoMo data holds {len(turns)} turns, fewer than {max(counts)}")
    return turns[: max(counts)]


def _check(counts: Sequence[int]) -> None:
    if not counts or min(counts) < 0:
        raise ValueError("filler counts must be one or more numbers of turns, none negative")


def work(cases: Sequence[Case], counts: Sequence[int]) -> int:
    """The steps ``evaluate`` reports to ``progress``: one per item and filler count."""
    return len(cases) * len(counts)


def evaluate(
    cases: Sequence[Case],
    open_memory: Callable[[str], MemoryOS],
    counts: Sequence[int] = FILLERS,
    fillers: Sequence[Turn] | None = None,
    llm: LLM | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the harness; ``open_memory(path)`` opens a fresh MemoryOS for one item.

    Every item is asked once per filler count in ``counts``, after the first that many turns of
    ``fillers`` (default: ``filler_pool(counts)``), each time in a database of its own, removed
    once asked.  ``ValueError`` before anything is done for counts ``filler_pool`` refuses or
    too few fillers.  ``progress(n, total)`` is told of each item asked, out of
    ``work(cases, counts)`` (first ``(0, total)``).
    """
    _check(counts)
    pool = filler_pool(counts) if fillers is None else list(fillers)
    if len(pool) < max(counts):
        raise ValueError(f"{len(pool)} filler turns, fewer than the {max(counts)} asked for")
    run = _Run(llm)
    step = progress or (lambda n, total: None)
    total = work(cases, counts)
    step(0, total)
    for count in counts:
        for case in cases:
            with (
                tempfile.TemporaryDirectory() as folder,
                open_memory(str(Path(folder) / "prefeval.db")) as mos,
            ):
                cube, external = ingest(mos, case, pool[:count])
                run.ask(mos, case, cube, external, f"p{evidence_turn(case, mos.embedder)}", count)
            step(1, total)
    return run.result(counts, len(cases))


def ingest(mos: MemoryOS, case: Case, fillers: Sequence[Turn]) -> tuple[str, dict[str, str]]:
    """A new user ``USER`` and cube holding, in one session, the case's conversation (labelled
    ``p0``, ``p1``…) then ``fillers`` (``f0``…); waits for the background work.  Returns the
    cube id and item id → label."""
    mos.create_user(USER)
    name = f"{case.topic}-{case.form}-{case.index}-{len(fillers)}"
    cube = mos.create_cube(name, owner=USER).cube_id
    said = messages(case.turns, "p", 0) + messages(fillers, "f", len(case.turns))
    ids = mos.add(said, user_id=USER, cube_id=cube, session_id="conversation")
    mos.wait(cube)
    return cube, dict(zip(ids, (m["id"] for m in said), strict=True))


def messages(turns: Sequence[Turn], prefix: str, first: int) -> list[dict[str, str]]:
    """``turns`` as messages labelled ``prefix`` + position (their ``id``), the n-th at
    ``START`` + ``first`` + n minutes."""
    return [
        {"role": role, "content": text, "id": f"{prefix}{n}",
         "timestamp": (START + timedelta(minutes=first + n)).isoformat()}
        for n, (role, text) in enumerate(turns)
    ]  # fmt: skip


def rotated(options: Sequence[str], question: str) -> tuple[list[str], int]:
    """``options`` (the aligned one first) turned left by the CRC-32 of ``question`` (the same
    for an item in every run, spread evenly over many), and where the aligned one went."""
    turn = zlib.crc32(question.encode("utf-8")) % len(options)
    return [*options[turn:], *options[:turn]], (len(options) - turn) % len(options)


def _long_tier(item: MemoryItem) -> bool:
    """A long-tier item (a preference, a fact) in the context counts for its sources."""
    return item.tier == "long"


@dataclass
class _Run:
    """The state of one harness run: a tally per grouping, the context sizes, failed calls."""

    llm: LLM | None
    tallies: dict[str, Tally] = field(
        default_factory=lambda: {g: Tally("recall@1000tok") for g in ("overall", *GROUPINGS)}
    )
    tokens: list[int] = field(default_factory=list)
    llm_errors: int = 0
    unanswered: int = 0

    def ask(
        self, mos: MemoryOS, case: Case, cube: str, external: dict[str, str], label: str, count: int
    ) -> None:
        """Ask the case's question of ``cube`` and tally its marks in each grouping."""
        packed = {b: mos.context(case.question, user_id=USER, cube_ids=[cube], budget_tokens=b)
                  for b in BUDGETS}  # fmt: skip
        marks = {f"recall@{b}tok": float(label in covered(ctx, external, _long_tier))
                 for b, ctx in packed.items()}  # fmt: skip
        turn = next(item_id for item_id, name in external.items() if name == label)
        held = mos.get_preferences(user_id=USER, cube_id=cube)
        marks["preference_extracted"] = float(any(turn in p.evidence for p in held))
        if self.llm is not None and case.options:
            marks["mcq_aligned@1000tok"] = self._choice(self.llm, case, packed[1000].text)
        self.tokens.append(packed[1000].tokens)
        groups = {"overall": "overall", "by_form": case.form, "by_topic": case.topic,
                  "by_fillers": str(count),
                  "by_form_and_fillers": f"{case.form}, {count}"}  # fmt: skip
        for grouping, group in groups.items():
            for metric, value in marks.items():
                self.tallies[grouping].add(group, metric, value)

    def _choice(self, llm: LLM, case: Case, context: str) -> float:
        """1 when the model picks the aligned option from ``context``, else 0."""
        shown, aligned = rotated(case.options, case.question)
        try:
            picked = answers.choose(llm, case.question, shown, context)
        except LLMError as exc:
            log.warning("answering %r failed: %s", case.question, exc)
            self.llm_errors += 1
            return 0.0
        self.unanswered += picked is None
        return float(picked == aligned)

    def result(self, counts: Sequence[int], cases: int) -> dict[str, Any]:
        overall: dict[str, Any] = dict(self.tallies["overall"].summary()["overall"])
        overall["tokens_per_query"] = round(statistics.fmean(self.tokens), 1)
        if self.llm is not None:
            overall |= {"llm_model": self.llm.model, "llm_errors": self.llm_errors,
                        "mcq_unanswered": self.unanswered}  # fmt: skip
        found: dict[str, Any] = {"overall": overall}
        found |= {grouping: self.tallies[grouping].summary() for grouping in GROUPINGS}
        return found | {"run": {"items": cases, "fillers": list(counts), "budgets": list(BUDGETS)}}


def table(result: dict[str, Any]) -> list[str]:
    """The result as aligned text lines: overall, then each group of each grouping."""
    metrics = [f"recall@{b}tok" for b in BUDGETS] + ["preference_extracted"]
    metrics += [m for m in ("mcq_aligned@1000tok",) if m in result["overall"]]
    width = max(len(g) for grouping in GROUPINGS for g in result[grouping]) + 2
    lines = [f"{'group':<{width}} {'n':>5} " + " ".join(f"{m:>20}" for m in metrics)]
    rows = [("overall", result["overall"])]
    rows += [(g, v) for grouping in GROUPINGS for g, v in result[grouping].items()]
    for name, values in rows:
        cells = " ".join(f"{values.get(m, float('nan')):>20.3f}" for m in metrics)
        lines.append(f"{name:<{width}} {values['questions']:>5} {cells}")
    o = result["overall"]
    lines.append(f"tokens/query (1000 budget) {o['tokens_per_query']}")
    if "llm_model" in o:
        lines.append(f"options picked by {o['llm_model']} from the 1000-token context; "
                     f"failed calls (scored 0): {o['llm_errors']}; "
                     f"answers without a letter: {o['mcq_unanswered']}")  # fmt: skip
    return lines
