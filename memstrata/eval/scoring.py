"""What the harnesses share: marks tallied by group, and the turns a packed context covers.

A *mark* is one question's value of one metric, in [0, 1] (1: found); a group's figure is the
mean of its marks.  Turns are named by the ids the benchmark gives them (LoCoMo's ``dia_id``,
PrefEval's labels), stored as each item's ``external_id``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from memstrata.model import MemoryItem
from memstrata.retrieval.pack import Context


@dataclass
class Tally:
    """Per-group marks of each metric; ``counted`` is the metric every question gets a mark of,
    whose count is the group's ``questions``."""

    counted: str
    marks: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, group: str, metric: str, value: float) -> None:
        self.marks.setdefault(group, {}).setdefault(metric, []).append(value)

    def summary(self) -> dict[str, dict[str, float]]:
        """Each group's mean of each metric (3 decimals) and its ``questions``."""
        return {
            group: {m: round(statistics.fmean(v), 3) for m, v in metrics.items()}
            | {"questions": len(metrics.get(self.counted, []))}
            for group, metrics in self.marks.items()
        }


def covered(
    ctx: Context, external: Mapping[str, str], credit: Callable[[MemoryItem], bool]
) -> set[str]:
    """The external ids of the turns in ``ctx``, and of the sources of the derived items in it
    that ``credit`` accepts; ``external`` maps item ids to external ids."""
    ids = {i.external_id for i in ctx.items if i.external_id}
    ids |= {external.get(s.item_id or "", "") for i in ctx.items if credit(i) for s in i.sources}
    return ids
