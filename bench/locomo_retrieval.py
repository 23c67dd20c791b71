"""Turn-level retrieval on LoCoMo: how often the evidence turns reach a packed context.

Run (the data is CC BY-NC and stays in ../shared; nothing is copied)::

    python bench/locomo_retrieval.py --data ../shared/data/locomo/locomo_dev.json \
        --embedder e5 --embedder minilm --embedder use

For each conversation a fresh database gets every turn through ``MemoryOS.add`` (speaker as
``name``, the session date as ``timestamp``, ``dia_id`` as ``id``, image captions appended).
For each question of categories 1-4 with evidence, ``search`` ranks the turns; a question counts
as recalled when *all* its evidence turns are in the top k, or in a context filled in rank order
with lines ``[date] speaker: text`` up to a token budget (tokens = words x 1.3, as the
published baselines count).  This is the measurement behind the default embedder; the full
harness with tiers and packing is ``memstrata eval locomo`` (a later issue).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from memstrata import MemoryOS
from memstrata.model import Hit

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 20)
BUDGETS = (500, 1000, 2000)


def session_messages(conversation: dict[str, Any]) -> list[list[dict[str, Any]]]:
    sessions = []
    numbers = sorted(
        int(m.group(1)) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k))
    )
    for n in numbers:
        when = datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        sessions.append(
            [
                {
                    "role": "user",
                    "name": turn["speaker"],
                    "content": turn["text"]
                    + (
                        f" [shared an image: {turn['blip_caption']}]"
                        if turn.get("blip_caption")
                        else ""
                    ),
                    "timestamp": when.isoformat() + "Z",
                    "id": turn["dia_id"],
                }
                for turn in conversation[f"session_{n}"]
            ]
        )
    return sessions


def evidence_ids(qa: dict[str, Any]) -> set[str]:
    return {e for raw in qa.get("evidence", []) for e in re.findall(r"D\d+:\d+", raw)}


def tokens(line: str) -> float:
    return len(line.split()) * 1.3


def packed_ids(hits: list[Hit], budget: int) -> set[str]:
    used, ids = 0.0, set()
    for hit in hits:
        item = hit.item
        line = f"[{item.event_time:%Y-%m-%d}] {item.speaker}: {item.text}"
        if used + tokens(line) > budget:
            break
        used += tokens(line)
        ids.add(item.external_id or "")
    return ids


def run(data: list[dict[str, Any]], embedder: str, **settings: Any) -> dict[str, Any]:
    found: dict[str, list[bool]] = {}
    n_turns, ingest_s, query_s = 0, 0.0, []
    for sample in data:
        with tempfile.TemporaryDirectory() as tmp:
            db = str(Path(tmp) / "locomo.db")
            with MemoryOS.open(db, embedder=embedder, workers=0, **settings) as mos:
                mos.create_user("eval")
                # Turn-level: every turn stays in the working tier (no segments, no facts).
                raw = {"working_capacity": 10_000}
                cube = mos.create_cube(sample["sample_id"], owner="eval", settings=raw).cube_id
                start = time.perf_counter()
                for i, messages in enumerate(session_messages(sample["conversation"])):
                    n_turns += len(messages)
                    mos.add(messages, user_id="eval", cube_id=cube, session_id=f"s{i + 1}")
                ingest_s += time.perf_counter() - start
                for qa in sample["qa"]:
                    gold = evidence_ids(qa)
                    if qa["category"] not in CATEGORIES or not gold:
                        continue
                    t0 = time.perf_counter()
                    hits = mos.search(qa["question"], user_id="eval", top_k=60)
                    query_s.append(time.perf_counter() - t0)
                    ranked = [h.item.external_id for h in hits]
                    marks = {f"recall@{k}": gold <= set(ranked[:k]) for k in KS}
                    marks |= {f"recall@{b}tok": gold <= packed_ids(hits, b) for b in BUDGETS}
                    for key, ok in marks.items():
                        for group in ("overall", CATEGORIES[qa["category"]]):
                            found.setdefault(f"{group}/{key}", []).append(ok)
    summary: dict[str, Any] = {k: round(sum(v) / len(v), 3) for k, v in found.items()}
    summary["questions"] = len(found["overall/recall@1"])
    summary["ingest_turns_per_s"] = round(n_turns / ingest_s, 1)
    summary["query_ms_p50"] = round(sorted(query_s)[len(query_s) // 2] * 1000, 1)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--embedder", action="append", default=[])
    parser.add_argument("--keyword-weight", type=float, default=None)
    parser.add_argument("--dense-weight", type=float, default=None)
    parser.add_argument("--out")
    args = parser.parse_args()
    data = json.loads(Path(args.data).read_text())
    results = {}
    for name in args.embedder or ["e5"]:
        weights = {"keyword_weight": args.keyword_weight, "dense_weight": args.dense_weight}
        results[name] = run(data, name, **{k: v for k, v in weights.items() if v is not None})
        r = results[name]
        print(
            f"{name:8} q={r['questions']} "
            + " ".join(f"{k}={r['overall/' + k]:.3f}" for k in
                       ["recall@1", "recall@5", "recall@10", "recall@20", "recall@500tok",
                        "recall@1000tok", "recall@2000tok"])
            + f" ingest={r['ingest_turns_per_s']}/s query_p50={r['query_ms_p50']}ms",
            flush=True,
        )  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
