"""Query decomposition without a model: one sub-query per person or thing a question joins.

"Did Jon and Gina both take part in dance competitions?" asks two questions, and their answers
are in different turns, often in different sessions; one query ranks them far apart, and the
turns of whichever name weighs more fill the budget.  ``decompose`` splits a query on a
coordination of capitalised names ("Jon and Gina", "Ann, Bo and Cy", "Tim and John's") into one
query per name, with "both" dropped; ``interleave`` merges the parts' results round-robin, so
each part's best hits come first.  A query without such a coordination is left whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memstrata.model import Hit

_NAME = r"[A-Z][\w\-]*"
_COORDINATION = re.compile(
    rf"\b(?P<names>{_NAME}(?:\s*,\s*{_NAME})*,?\s+(?:and|&)\s+{_NAME})(?P<poss>['’]s\b)?"
)
_SPLIT = re.compile(r"\s*,\s*(?:and\s+|&\s+)?|\s+(?:and|&)\s+")
_BOTH = re.compile(r"\b(?:both|all)\s+", re.IGNORECASE)


def decompose(query: str) -> list[str]:
    """The sub-queries of ``query``: one per name of its first coordination of capitalised
    names, or ``[query]`` when there is none."""
    for match in _COORDINATION.finditer(query):
        names = [n for n in _SPLIT.split(match.group("names")) if n]
        if len(set(names)) < 2:
            return [query]
        possessive = match.group("poss") or ""
        head, tail = query[: match.start()], query[match.end() :]
        return [_BOTH.sub("", f"{head}{name}{possessive}{tail}") for name in names]
    return [query]


def interleave(parts: Sequence[Sequence[Hit]], limit: int) -> list[Hit]:
    """Round-robin over ``parts`` (each best first): the first of each, then the second of
    each, …; an item already taken is skipped; at most ``limit`` hits."""
    out: list[Hit] = []
    seen: set[str] = set()
    for rank in range(max((len(p) for p in parts), default=0)):
        for part in parts:
            if rank < len(part) and part[rank].item.id not in seen:
                seen.add(part[rank].item.id)
                out.append(part[rank])
    return out[:limit]
