"""LoCoMo replay: ingest each conversation once, then ask its questions again and again.

Run from the repository root (the data is CC BY-NC and stays in ../shared; nothing is copied)::

    python bench/locomo_replay.py --data ../shared/data/locomo/locomo_dev.json \
        --dir /tmp/locomo --out replay.json

``memstrata eval locomo`` ingests every conversation anew on each run (most of its time).  This
script splits the two halves so that a change to the query side is measured in minutes:

* **ingest** (once per conversation, kept in ``DIR/<sample_id>/``): exactly what the harness
  does (``locomo.ingest`` into a fresh SQLite database opened with the settings ``memstrata eval
  locomo`` uses: tiers on, defaults, one worker; then ``MemoryOS.wait``), with item id →
  ``dia_id`` and the ingest time written to ``DIR/<sample_id>/ingest.json``.  A conversation
  whose folder holds ``ingest.json`` is reused; ``--reingest`` drops them first (needed after a
  change to the write side: readers, tiers, what is embedded).
* **replay**: each conversation's database is copied to a throwaway folder and opened with
  ``workers=0, queue_only=True``: tasks are queued but never run, so the reads a search counts
  (visits, heat, the read-driven promotion of a hot segment) change nothing, and two replays of
  the same code give the same figures.  Every question is asked with today's query-side code
  through ``locomo.Run.ask``, the harness's own scoring (search top 20, contexts of 500 / 1000 /
  2000 tokens).

The figures and the JSON written by ``--out`` have the shape of ``memstrata eval locomo``'s
(``overall``, ``by_category``, ``query_ms``), plus ``replay`` (where the databases are, when each
was ingested and by which commit).  One difference from an end-to-end run: there, the reads of
the questions asked so far heat segments and may promote them into the long tier while the
later questions are asked (a worker thread, at its own pace); here nothing read changes the
database.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memstrata import MemoryOS, Settings
from memstrata.eval import locomo

DB = "locomo.db"
RECORD = "ingest.json"


def commit() -> str:
    """The repository's HEAD (``+dirty`` when the tree has changes), or ``unknown``."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "memstrata"]).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def ingest(sample: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Ingest ``sample`` into ``folder/locomo.db`` as ``memstrata eval locomo`` does (tiers on,
    defaults, one worker), unless ``folder`` already holds a finished ingest; its record."""
    record = folder / RECORD
    if record.exists():
        return dict(json.loads(record.read_text(encoding="utf-8")))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settings = Settings.load(None, db=str(folder / DB), workers=1)
    start = time.perf_counter()
    with MemoryOS.open(settings=settings) as mos:
        _, external = locomo.ingest(mos, sample, {})
    done = {
        "sample_id": sample["sample_id"],
        "turns": len(external),
        "ingest_s": round(time.perf_counter() - start, 2),
        "commit": commit(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "external": external,
    }
    record.write_text(json.dumps(done), encoding="utf-8")  # last: marks the ingest finished
    return done


def replay(
    sample: dict[str, Any],
    folder: Path,
    record: dict[str, Any],
    run: locomo.Run,
    overrides: dict[str, str],
) -> None:
    """Ask every question of ``sample`` of a throwaway copy of ``folder``'s database, frozen
    (no background task runs), tallying into ``run``; ``overrides`` are settings (``--set``)."""
    run.turns += record["turns"]
    run.ingest_s += record["ingest_s"]
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "db"
        shutil.copytree(folder, copy)
        settings = Settings.load(None, db=str(copy / DB), **overrides, workers=0, queue_only=True)
        with MemoryOS.open(settings=settings) as mos:
            for qa in locomo.asked(sample):
                run.ask(mos, qa, record["external"])


#: The marks kept per question in the result's ``questions`` (in the order asked).
KEPT = ("recall@10", "recall@1000tok", "recall@2000tok")


def per_question(samples: list[dict[str, Any]], run: locomo.Run) -> list[dict[str, Any]]:
    """Each question asked, in order, with its ``KEPT`` marks: two replays can be compared
    question by question, and a change's winners and losers listed."""
    asked = [(s["sample_id"], qa) for s in samples for qa in locomo.asked(s)]
    marks = run.tally.marks["overall"]
    return [
        {
            "sample_id": sid,
            "question": qa["question"],
            "category": locomo.CATEGORIES[qa["category"]],
        }
        | {m: marks[m][n] for m in KEPT}
        for n, (sid, qa) in enumerate(asked)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="LoCoMo JSON file")
    parser.add_argument("--dir", required=True, help="where the ingested databases are kept")
    parser.add_argument("--conversations", type=int, help="only the first N samples")
    parser.add_argument("--out", help="write the result as JSON here")
    parser.add_argument("--reingest", action="store_true", help="drop kept databases first")
    parser.add_argument("--ingest-only", action="store_true", help="ingest, ask nothing")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a setting for the replay only (an ablation: e.g. --set rrf_k=60); repeatable",
    )  # fmt: skip
    args = parser.parse_args()
    overrides = dict(pair.split("=", 1) for pair in args.set)
    samples = locomo.load(args.data)[: args.conversations]
    root = Path(args.dir)
    records = {}
    for sample in samples:
        folder = root / str(sample["sample_id"])
        if args.reingest:
            shutil.rmtree(folder, ignore_errors=True)
        records[sample["sample_id"]] = ingest(sample, folder)
        print(f"ingested {sample['sample_id']}: {records[sample['sample_id']]['turns']} turns, "
              f"{records[sample['sample_id']]['ingest_s']} s", file=sys.stderr)  # fmt: skip
    if args.ingest_only:
        return
    run = locomo.Run(None, None)
    for sample in samples:
        folder = root / str(sample["sample_id"])
        replay(sample, folder, records[sample["sample_id"]], run, overrides)
    result = run.result()
    result["questions"] = per_question(samples, run)
    result["replay"] = {
        "dir": str(root),
        "commit": commit(),
        "settings": overrides,
        "ingested": {k: {"commit": r["commit"], "at": r["at"]} for k, r in records.items()},
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    for line in locomo.table(result):
        print(line)


if __name__ == "__main__":
    main()
