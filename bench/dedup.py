"""How often the long tier's duplicate rule merges wrongly: precision and recall on labelled pairs.

Run from the repository root (LoCoMo is CC BY-NC and stays where it is; nothing of it is written
into the repository)::

    python bench/dedup.py --locomo ../shared/data/locomo/locomo_dev.json --out bench/dedup.json

The long tier merges a new fact into an existing one of the same subject when their vectors are
within ``tiers.long.DUPLICATE_COSINE`` (``LongTier._counterpart``); a wrong merge loses a fact (the
older item becomes ``merged`` and only the new text is current).  The pairs, each two fact texts
of one subject, are labelled:

* ``same`` (synthetic): one fact said twice in other words ("Ann works as a nurse." / "Ann is a
  nurse by profession."), from ``PARAPHRASES``: a merge is right;
* ``updated`` (synthetic): one attribute with an old and a new value ("Ann lives in Lisbon." /
  "Ann lives in Porto."): a merge would lose the old value as history and is wrong (supersession,
  not merging, is the right outcome);
* ``different`` (the development conversations): two of LoCoMo's reference observations of one
  speaker in one session that cite different turns: the annotators wrote one observation per
  thing said, so the two are different facts by construction: a merge is wrong.

Printed and written: for thresholds around the tier's, the merge precision (merged pairs that are
``same``) and recall (``same`` pairs merged), and the wrong merges per label.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.config import Settings
from memstrata.embed import make_embedder
from memstrata.tiers.long import DUPLICATE_COSINE

NAMES = ["Ann", "Bruno", "Chloe", "Dmitri", "Esi", "Farah", "Goran", "Hana", "Ivo", "Jun"]
# (attribute, ways of saying value X, values): each way is a template of the same fact.
PARAPHRASES: list[tuple[str, list[str], list[str]]] = [
    ("home", ["{n} lives in {v}.", "{n}'s home is in {v}.", "{n} is based in {v} these days."],
     ["Lisbon", "Porto", "Oslo", "Nairobi", "Kyoto"]),
    ("job", ["{n} works as a {v}.", "{n} is a {v} by profession.", "{n}'s job is {v}."],
     ["nurse", "paramedic", "teacher", "carpenter", "pilot"]),
    ("pet", ["{n} has a dog named {v}.", "{n}'s dog is called {v}.", "{n} owns a dog, {v}."],
     ["Biscuit", "Rex", "Luna", "Pepper", "Miso"]),
    ("car", ["{n} drives a {v}.", "{n}'s car is a {v}.", "{n} owns a {v}."],
     ["Volvo", "Tesla", "Fiat", "Toyota", "Skoda"]),
    ("food", ["{n}'s favourite food is {v}.", "{n} loves {v} more than any other food.",
              "{n} likes {v} best of all foods."], ["sushi", "tacos", "ramen", "paella", "pizza"]),
    ("sport", ["{n} plays {v} on weekends.", "{n} spends weekends playing {v}.",
               "At weekends {n} plays {v}."], ["tennis", "football", "chess", "volleyball", "golf"]),
    ("employer", ["{n} works at {v}.", "{n} is employed by {v}.", "{n}'s employer is {v}."],
     ["Siemens", "the city hospital", "a bakery", "Google", "the post office"]),
    ("diet", ["{n} is {v}.", "{n} follows a {v} diet.", "{n} eats a {v} diet."],
     ["vegetarian", "vegan", "pescatarian", "keto", "gluten-free"]),
]  # fmt: skip


def synthetic_pairs() -> list[tuple[str, str, str]]:
    """(label, text a, text b): ``same`` and ``updated`` pairs for every name and attribute."""
    pairs = []
    for n, (_, ways, values) in itertools.product(NAMES, PARAPHRASES):
        for v in values[:2]:
            pairs += [("same", a.format(n=n, v=v), b.format(n=n, v=v))
                      for a, b in itertools.combinations(ways, 2)]  # fmt: skip
        old, new = values[0], values[1]
        pairs += [("updated", w.format(n=n, v=old), w.format(n=n, v=new)) for w in ways]
    return pairs


def locomo_pairs(path: Path) -> list[tuple[str, str, str]]:
    """``different`` pairs: observations of one speaker in one session citing other turns."""
    pairs = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        for by_speaker in conversation["observation"].values():
            for said in by_speaker.values():
                for (a, ev_a), (b, ev_b) in itertools.combinations(said, 2):
                    if set(_ids(ev_a)).isdisjoint(_ids(ev_b)):
                        pairs.append(("different", a, b))
    return pairs


def _ids(evidence: Any) -> list[str]:
    return [evidence] if isinstance(evidence, str) else list(evidence)


def measure(pairs: list[tuple[str, str, str]], thresholds: list[float]) -> dict[str, Any]:
    """Cosine of every pair with the default embedder, and the merge rule's figures."""
    embedder = make_embedder("e5", Settings())
    a = embedder.embed_passages([p[1] for p in pairs])
    b = embedder.embed_passages([p[2] for p in pairs])
    cosine = np.einsum("ij,ij->i", a, b)
    labels = np.array([p[0] for p in pairs])
    rows = {}
    for t in thresholds:
        merged = cosine >= t
        right = int((merged & (labels == "same")).sum())
        rows[f"{t:.2f}"] = {
            "precision": round(right / max(1, int(merged.sum())), 4),
            "recall": round(right / max(1, int((labels == "same").sum())), 4),
            "wrong_merges": {
                k: int((merged & (labels == k)).sum()) for k in ("updated", "different")
            },
        }
    worst = sorted(
        ((float(c), p) for c, p in zip(cosine, pairs, strict=True) if p[0] != "same"),
        reverse=True,
    )[:5]
    return {
        "pairs": {k: int((labels == k).sum()) for k in ("same", "updated", "different")},
        "threshold": DUPLICATE_COSINE,
        "by_threshold": rows,
        "closest_wrong": [
            {"cosine": round(c, 4), "label": p[0], "a": p[1], "b": p[2]} for c, p in worst
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, help="LoCoMo's JSON (the development split)")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    pairs = synthetic_pairs() + (locomo_pairs(args.locomo) if args.locomo else [])
    thresholds = [0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96, DUPLICATE_COSINE, 0.98]
    report = measure(pairs, sorted(set(thresholds)))
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
