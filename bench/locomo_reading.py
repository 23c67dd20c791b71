"""Ablation of question reading (``retrieval/question.py``) on LoCoMo: each step's share.

Run from the repository root (the data is CC BY-NC and stays in ../shared)::

    python bench/locomo_reading.py --data ../shared/data/locomo/locomo_dev.json --out reading.json

Each conversation is ingested once as raw turns (as ``memstrata eval locomo --no-tiers`` does:
speaker as ``name``, session date as ``timestamp``, ``dia_id`` as ``id``), then every question
of categories 1-4 with evidence is asked through ``MemoryOS.context`` within 1000 and 2000
tokens under each of these settings, one step added at a time:

0. ``none``: no reading (the search of the previous round);
1. ``chain``: the context adds only the named speakers' next turns (``expand_chain``);
2. ``speaker``: items of speakers the question does not name score ``OTHER_SPEAKER``;
3. ``they``: the dense channel embeds the question with those names said as "they";
4. ``dates``: items within a day of a date the question names score ``DATE_BOOST``;
5. ``periods`` (the default): the days and months the question names are a third channel, the
   dense ranking within that time (``search._dated``).

A question counts when all its evidence turns are verbatim in the context (the harness's
``recall@Ntok``).  With every step on, the script also records ``ranked@K`` (K = 27, 55: about
what 1000 and 2000 tokens hold): all the evidence among the first K search hits, the ceiling of
what packing can reach; and, under ``subjects``, how many questions name exactly one speaker and
what share of their evidence turns that speaker said.  The steps are switched off by setting the module constants and functions
they use back to neutral values (this script only; the library has no such switches).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memstrata import MemoryOS
from memstrata.eval.locomo import CATEGORIES, evidence, load, sessions
from memstrata.memory import reading
from memstrata.retrieval import search
from memstrata.retrieval.question import subjects

STEPS = ("none", "chain", "speaker", "they", "dates", "periods")
BUDGETS = (1000, 2000)
RANKS = (27, 55)


@contextmanager
def reading_up_to(step: str) -> Iterator[None]:
    """The library as it reads questions up to ``step`` (see the module docstring)."""
    level = STEPS.index(step)
    saved = (reading.subjects, search.OTHER_SPEAKER, search.as_speakers, search.DATE_BOOST,
             search.periods)  # fmt: skip
    if level < 1:
        reading.subjects = lambda store, query, cube_ids: frozenset()  # type: ignore[assignment]
    if level < 2:
        search.OTHER_SPEAKER = 1.0
    if level < 3:
        search.as_speakers = lambda query, speakers: query  # type: ignore[assignment]
    if level < 4:
        search.DATE_BOOST = 1.0
    if level < 5:
        search.periods = lambda query: []  # type: ignore[assignment]
    try:
        yield
    finally:
        (reading.subjects, search.OTHER_SPEAKER, search.as_speakers, search.DATE_BOOST,
         search.periods) = saved  # fmt: skip


def run(data: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{step: {"<group>/recall@<N>tok": share}} over every question of ``data`` (the last step
    with ``"<group>/ranked@<K>"`` too), and ``"subjects"`` (see the module docstring)."""
    marks: dict[str, dict[str, list[bool]]] = {s: {} for s in STEPS}
    theirs: list[bool] = []  # per evidence turn of a question naming one speaker: theirs?
    for n, sample in enumerate(data, start=1):
        start = time.perf_counter()
        with (
            tempfile.TemporaryDirectory() as folder,
            MemoryOS.open(str(Path(folder) / "locomo.db"), workers=0) as mos,
        ):
            mos.create_user("eval")
            raw = {"working_capacity": 10_000}
            cube = mos.create_cube(sample["sample_id"], owner="eval", settings=raw).cube_id
            said_by: dict[str, str] = {}
            for session_id, messages in sessions(sample["conversation"]):
                mos.add(messages, user_id="eval", cube_id=cube, session_id=session_id)
                said_by |= {m["id"]: m["name"] for m in messages}
            asked = [q for q in sample["qa"] if q["category"] in CATEGORIES and evidence(q)]
            for qa in asked:
                named = subjects(mos.store, qa["question"], [cube])
                if len(named) == 1:
                    theirs += [said_by.get(e) in named for e in evidence(qa)]
            for step in STEPS:
                with reading_up_to(step):
                    for qa in asked:
                        for budget in BUDGETS:
                            ctx = mos.context(qa["question"], user_id="eval", budget_tokens=budget)
                            found = evidence(qa) <= {i.external_id for i in ctx.items}
                            for group in ("overall", CATEGORIES[qa["category"]]):
                                key = f"{group}/recall@{budget}tok"
                                marks[step].setdefault(key, []).append(found)
                        if step == STEPS[-1]:
                            hits = mos.search(qa["question"], user_id="eval", top_k=max(RANKS))
                            ranked = [h.item.external_id for h in hits]
                            for k in RANKS:
                                found = evidence(qa) <= set(ranked[:k])
                                for group in ("overall", CATEGORIES[qa["category"]]):
                                    marks[step].setdefault(f"{group}/ranked@{k}", []).append(found)
        took = time.perf_counter() - start
        print(f"conversation {n}/{len(data)} done in {took:.0f} s", file=sys.stderr, flush=True)
    result = {
        step: {key: round(sum(v) / len(v), 3) for key, v in found.items()}
        for step, found in marks.items()
    }
    result["subjects"] = {
        "evidence_turns": len(theirs),
        "said_by_the_one_named": round(sum(theirs) / max(1, len(theirs)), 3),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="a LoCoMo JSON file")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args()
    result = run(load(args.data))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    groups = ("overall", "multi-hop", "temporal", "open-domain", "single-hop")
    print("step     " + "".join(f"{g:>14}" for g in groups))
    for step in STEPS:
        cells = ["/".join(_share(result[step], g, b) for b in BUDGETS) for g in groups]
        print(f"{step:<9}" + "".join(f"{c:>14}" for c in cells))
    last = result[STEPS[-1]]
    ceiling = "/".join(f"{last[f'overall/ranked@{k}']:.3f}" for k in RANKS)
    print(f"all evidence in the first {' / '.join(map(str, RANKS))} hits: {ceiling}")
    named = result["subjects"]
    print(f"evidence turns of questions naming one speaker said by them: "
          f"{named['said_by_the_one_named']:.3f} of {named['evidence_turns']}")  # fmt: skip


def _share(figures: dict[str, float], group: str, budget: int) -> str:
    value = figures.get(f"{group}/recall@{budget}tok")
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    main()
