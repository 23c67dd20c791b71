"""The parts of a hit's score (``Hit.parts``): how each step of a search records what it did.

A hit's parts sum to its score (within floating-point rounding).  Fusion gives each hit one
``channel`` part per channel that ranked it (``fusion.channel_parts``); every step after it
that moves a score goes through one of these helpers, which add one ``adjustment`` part:

* ``adjusted``: the score set to a new value (the part is the difference);
* ``scaled``: the score multiplied by a factor (the part is ``(factor - 1) ×`` the score before
  it, and records the factor);
* ``noted``: the score unchanged, a zero-value part saying why a hit is where it is (a source
  turn shown for its fact, a sub-query it was asked as).

Each builds one ``Part`` and one ``Hit``, with a reason the caller wrote: a search records its
parts always, so they must stay cheap (a few objects per candidate, no formatting here).
"""

from __future__ import annotations

from memstrata.model import Hit, MemoryItem, Part


def adjusted(hit: Hit, name: str, score: float, reason: str) -> Hit:
    """``hit`` with its score set to ``score``, the change recorded as the part ``name``."""
    part = Part("adjustment", name, score - hit.score, reason)
    return Hit(hit.item, score, hit.ranks, (*hit.parts, part))


def scaled(hit: Hit, name: str, factor: float, reason: str) -> Hit:
    """``hit`` with its score multiplied by ``factor``, recorded as the part ``name`` whose
    value is ``(factor - 1) × hit.score``."""
    part = Part("adjustment", name, hit.score * (factor - 1.0), reason, factor=factor)
    return Hit(hit.item, hit.score * factor, hit.ranks, (*hit.parts, part))


def noted(hit: Hit, name: str, reason: str, item: MemoryItem | None = None) -> Hit:
    """``hit`` (or ``item`` in its place, taking its score, ranks and parts) with a
    zero-value part ``name`` saying ``reason``."""
    part = Part("adjustment", name, 0.0, reason)
    return Hit(hit.item if item is None else item, hit.score, hit.ranks, (*hit.parts, part))


def joined(item: MemoryItem, name: str, score: float, reason: str) -> Hit:
    """A hit for ``item``, which no channel ranked, scored ``score`` by the step ``name``."""
    return Hit(item, score, {}, (Part("adjustment", name, score, reason),))


def total(hit: Hit) -> float:
    """The sum of ``hit``'s parts (its score, when they were recorded)."""
    return sum(part.value for part in hit.parts)
