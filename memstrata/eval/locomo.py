"""The LoCoMo harness (``memstrata eval locomo``): does the evidence reach the packed context?

For each conversation a fresh database gets every turn through ``MemoryOS.add`` (speaker as
``name``, the session date as ``timestamp``, ``dia_id`` as ``id``, image captions kept).  Then,
for every question of categories 1–4 with evidence, it measures:

* ``recall@k`` (k = 1, 5, 10, 20): all evidence turns among the top k search hits;
* ``recall@Ntok`` (N = 500, 1000, 2000): all evidence turns **verbatim** in the context packed
  within N tokens (words × 1.3); a derived item (a segment summary) does not count for its
  sources — ``recall_src@Ntok`` is the variant where every derived item does, and
  ``recall_fact@Ntok`` the honest middle: a derived item that is not a segment and cites at
  most ``FACT_SOURCES`` turns (a fact, a profile entry, a preference) counts for them;
* ``answer_token_recall@1000tok``: the share of the gold answer's content words present in the
  1000-token context (questions whose answer has content words);
* ``answer_in_context``: the gold answer string in the 1000-token context (answers of at most
  four words only); ``tokens_per_query`` of that context; query latency p50/p95 (and each
  question's, in the order asked, under the result's ``query_ms``); ingest turns/s;
* with an LLM (``evaluate(..., llm=...)``): ``f1`` and ``bleu1`` of the model's answer from the
  1000-token context against the gold answer (``eval.answers``).

Results are per category (official mapping: 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop) and overall.  LoCoMo is CC BY-NC: read it where it lies, never copy it.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memstrata.errors import LLMError
from memstrata.eval import answers
from memstrata.eval.scoring import Tally, covered
from memstrata.llm.base import LLM
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem

log = logging.getLogger(__name__)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 20)
BUDGETS = (500, 1000, 2000)
SHORT_ANSWER_WORDS = 4
#: A derived item citing at most this many turns counts for them in ``recall_fact``.
FACT_SOURCES = 3


def load(path: str | Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file; ``ValueError`` saying what is wrong with any other file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path} as JSON: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path}: expected a non-empty JSON list of LoCoMo samples")
    for i, sample in enumerate(data):
        ok = isinstance(sample, dict) and isinstance(sample.get("conversation"), dict)
        if not ok or not isinstance(sample.get("qa"), list) or "sample_id" not in sample:
            raise ValueError(f"{path}: sample {i} lacks sample_id, conversation or qa")
    return data


def sessions(conversation: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(session id, messages) in session order; sessions without turns are skipped."""
    numbers = sorted(
        int(m.group(1)) for key in conversation if (m := re.fullmatch(r"session_(\d+)", key))
    )
    for n in numbers:
        when = datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        yield f"session_{n}", [_message(turn, when) for turn in conversation[f"session_{n}"]]


def _message(turn: dict[str, Any], when: datetime) -> dict[str, Any]:
    caption = turn.get("blip_caption")
    text = turn["text"] + (f" [shared an image: {caption}]" if caption else "")
    return {"role": "user", "name": turn["speaker"], "content": text,
            "timestamp": when.isoformat() + "Z", "id": turn["dia_id"]}  # fmt: skip


def evidence(qa: dict[str, Any]) -> set[str]:
    """The evidence dia_ids of a question (the data has a few malformed entries)."""
    return {e for raw in qa.get("evidence", []) for e in re.findall(r"D\d+:\d+", raw)}


def _no_item(item: MemoryItem) -> bool:
    return False


def _any_item(item: MemoryItem) -> bool:
    return True


def _fact(item: MemoryItem) -> bool:
    """A derived item small enough to stand for its sources: not a segment summary, at most
    ``FACT_SOURCES`` sources."""
    return item.type != "segment" and len(item.sources) <= FACT_SOURCES


def evaluate(
    data: list[dict[str, Any]],
    open_memory: Callable[[str], MemoryOS],
    cube_settings: dict[str, Any] | None = None,
    llm: LLM | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the harness; ``open_memory(path)`` opens a fresh MemoryOS for one conversation.

    Each conversation's cube gets ``cube_settings``; questions are asked once the background
    work of its ingest is done (``MemoryOS.wait``).  With ``llm``, each question is also
    answered from its 1000-token context and scored (``f1``, ``bleu1``; a failed call scores 0
    and is counted in ``llm_errors``).  ``progress(n, total)`` is told of each step done: a
    conversation ingested counts its turns, a question asked counts 1, out of ``work(data)``
    (first ``(0, total)``; the ``n`` add up to ``total``).
    """
    run = Run(llm, cube_settings)
    total = work(data)
    step = progress or (lambda n, total: None)
    step(0, total)
    for sample in data:
        with (
            tempfile.TemporaryDirectory() as folder,
            open_memory(str(Path(folder) / "locomo.db")) as mos,
        ):
            external = run.ingest(mos, sample)
            step(turns(sample), total)
            for qa in asked(sample):
                run.ask(mos, qa, external)
                step(1, total)
    return run.result()


def asked(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The sample's questions the harness asks: categories 1-4 with evidence."""
    return [qa for qa in sample["qa"] if qa["category"] in CATEGORIES and evidence(qa)]


def work(data: list[dict[str, Any]]) -> int:
    """The steps ``evaluate`` reports to ``progress``: every turn and every question asked."""
    return sum(turns(sample) + len(asked(sample)) for sample in data)


def turns(sample: dict[str, Any]) -> int:
    """How many turns the sample's sessions hold."""
    return sum(len(messages) for _, messages in sessions(sample["conversation"]))


def ingest(
    mos: MemoryOS, sample: dict[str, Any], settings: dict[str, Any] | None = None
) -> tuple[str, dict[str, str]]:
    """Add a sample's sessions, session by session, to a new cube of a new user ``eval``, and
    wait for the background work; returns the cube id and item id → dia_id."""
    mos.create_user("eval")
    cube = mos.create_cube(sample["sample_id"], owner="eval", settings=settings).cube_id
    external: dict[str, str] = {}
    for session_id, messages in sessions(sample["conversation"]):
        ids = mos.add(messages, user_id="eval", cube_id=cube, session_id=session_id)
        external.update(zip(ids, (m["id"] for m in messages), strict=True))
    mos.wait(cube)
    return cube, external


@dataclass
class Run:
    """The state of one harness run: the tally and the timings.  ``evaluate`` drives it;
    ``bench/locomo_replay.py`` asks its questions of databases ingested once (``ask``,
    ``result``), so both score alike."""

    llm: LLM | None
    settings: dict[str, Any] | None
    tally: Tally = field(default_factory=lambda: Tally("recall@1"))
    latencies: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    turns: int = 0
    ingest_s: float = 0.0
    llm_errors: int = 0

    def ingest(self, mos: MemoryOS, sample: dict[str, Any]) -> dict[str, str]:
        """Add a sample's sessions to a new cube; returns item id → dia_id."""
        start = time.perf_counter()
        _, external = ingest(mos, sample, self.settings)
        self.ingest_s += time.perf_counter() - start
        self.turns += len(external)
        return external

    def ask(self, mos: MemoryOS, qa: dict[str, Any], external: dict[str, str]) -> None:
        """Ask one question and tally its marks under ``overall`` and its category."""
        gold = evidence(qa)
        t0 = time.perf_counter()
        hits = mos.search(qa["question"], user_id="eval", top_k=max(KS))
        packed = {b: mos.context(qa["question"], user_id="eval", budget_tokens=b)
                  for b in BUDGETS}  # fmt: skip
        self.latencies.append((time.perf_counter() - t0) / (1 + len(BUDGETS)))
        ranked = [h.item.external_id for h in hits]
        marks = {f"recall@{k}": float(gold <= set(ranked[:k])) for k in KS}
        for b, ctx in packed.items():
            marks[f"recall@{b}tok"] = float(gold <= covered(ctx, external, _no_item))
            marks[f"recall_src@{b}tok"] = float(gold <= covered(ctx, external, _any_item))
            marks[f"recall_fact@{b}tok"] = float(gold <= covered(ctx, external, _fact))
        answer = str(qa.get("answer", ""))
        found = answers.token_recall(answer, packed[1000].text)
        if found is not None:
            marks["answer_token_recall@1000tok"] = found
        if answer and len(answer.split()) <= SHORT_ANSWER_WORDS:
            marks["answer_in_context"] = float(answer.lower() in packed[1000].text.lower())
        if self.llm is not None:
            marks |= self._scores(self.llm, qa["question"], answer, packed[1000].text)
        self.tokens.append(packed[1000].tokens)
        for group in ("overall", CATEGORIES[qa["category"]]):
            for metric, value in marks.items():
                self.tally.add(group, metric, value)

    def _scores(self, llm: LLM, question: str, gold: str, context: str) -> dict[str, float]:
        """F1 and BLEU-1 of the model's answer from ``context``."""
        try:
            said = answers.answer(llm, question, context)
        except LLMError as exc:
            log.warning("answering %r failed: %s", question, exc)
            self.llm_errors += 1
            said = ""
        return {"f1": answers.f1(said, gold), "bleu1": answers.bleu1(said, gold)}

    def result(self) -> dict[str, Any]:
        summary = self.tally.summary()
        overall: dict[str, Any] = dict(summary.pop("overall"))
        overall |= {
            "tokens_per_query": round(statistics.fmean(self.tokens), 1),
            "ingest_turns_per_s": round(self.turns / self.ingest_s, 1),
            "query_ms_p50": round(1000 * statistics.median(self.latencies), 1),
            "query_ms_p95": round(1000 * _p95(self.latencies), 1),
        }
        if self.llm is not None:
            overall |= {"llm_model": self.llm.model, "llm_errors": self.llm_errors}
        query_ms = [round(1000 * s, 2) for s in self.latencies]
        return {"overall": overall, "by_category": summary, "query_ms": query_ms}


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else max(values)


def table(result: dict[str, Any]) -> list[str]:
    """The result as aligned text lines: one row per group, one column per metric."""
    metrics = [f"recall@{k}" for k in KS] + [f"recall@{b}tok" for b in BUDGETS]
    metrics += [f"recall_src@{b}tok" for b in BUDGETS]
    metrics += [f"recall_fact@{b}tok" for b in BUDGETS]
    metrics += ["answer_in_context", "answer_token_recall@1000tok"]
    groups = {"overall": result["overall"], **result["by_category"]}
    metrics += [m for m in ("f1", "bleu1") if m in result["overall"]]
    widths = [max(17, len(m)) for m in metrics]
    lines = [
        "group        n    " + " ".join(f"{m:>{w}}" for m, w in zip(metrics, widths, strict=True))
    ]
    for name, values in groups.items():
        cells = " ".join(
            f"{values.get(m, float('nan')):>{w}.3f}" for m, w in zip(metrics, widths, strict=True)
        )
        lines.append(f"{name:<12} {values['questions']:<4} {cells}")
    o = result["overall"]
    lines.append(
        f"tokens/query {o['tokens_per_query']}  ingest {o['ingest_turns_per_s']} turns/s  "
        f"query p50 {o['query_ms_p50']} ms p95 {o['query_ms_p95']} ms"
    )
    if "llm_model" in o:
        lines.append(f"answers by {o['llm_model']} from the 1000-token context; "
                     f"failed calls (scored 0): {o['llm_errors']}")  # fmt: skip
    return lines
