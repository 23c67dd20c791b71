"""The lifecycle of a memory item and its legal transitions.

::

    generated ──▶ activated ──▶ merged | archived | frozen
                      ▲            │
                      └─ archived ─┘   (restore)
    any state ──▶ deleted             (erase only; deleted is final)

``frozen`` items are read-only (no update, delete, rollback or transition);
``merged``, ``archived`` and ``frozen`` items are left out of search unless asked for with
``include=[...]``.  The tiers move items between states themselves (a duplicate becomes
``merged``, a promoted page ``activated``); ``transition`` is how a person does it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from memstrata.errors import ConflictError, ValidationError
from memstrata.model import SEARCHABLE_STATUSES, STATUSES

TRANSITIONS: dict[str, tuple[str, ...]] = {
    "generated": ("activated",),
    "activated": ("merged", "archived", "frozen"),
    "archived": ("activated",),
    "merged": (),
    "frozen": (),
    "deleted": (),
}
#: States a search leaves out unless ``include`` names them.
Includable = Literal["merged", "archived", "frozen"]
INCLUDABLE: tuple[str, ...] = get_args(Includable)
#: States a person may move an item to with ``transition``.
Target = Literal["activated", "merged", "archived", "frozen"]
#: States whose items cannot be changed.
READ_ONLY: tuple[str, ...] = ("frozen", "deleted")


def check_transition(item_id: str, current: str, to: object) -> str:
    """``to`` when ``current → to`` is legal; ``ValidationError`` for an unknown state,
    ``ConflictError`` for an illegal move (naming the legal ones)."""
    if not isinstance(to, str) or to not in STATUSES:
        raise ValidationError(f"unknown state {to!r}", hint=f"states: {', '.join(STATUSES)}")
    if to == "deleted":
        raise ValidationError(
            "items become deleted only by erasure or deletion", hint="use erase() or delete()"
        )
    allowed = TRANSITIONS[current]
    if to not in allowed:
        legal = ", ".join(allowed) if allowed else "none"
        raise ConflictError(
            f"item {item_id!r} cannot go from {current} to {to}",
            hint=f"from {current} it may go to: {legal}",
        )
    return to


def check_writable(item_id: str, status: str) -> None:
    """``ConflictError`` when an item in ``status`` may not be changed."""
    if status in READ_ONLY:
        raise ConflictError(f"item {item_id!r} is {status}", hint=f"{status} items are read-only")


def searched_statuses(include: Sequence[str] | None) -> tuple[str, ...]:
    """The statuses a search covers: the searchable ones plus those ``include`` names."""
    if include is None:
        return SEARCHABLE_STATUSES
    if isinstance(include, str) or not isinstance(include, (list, tuple)):
        raise ValidationError("include must be a list of states")
    unknown = [s for s in include if s not in INCLUDABLE]
    if unknown:
        raise ValidationError(
            f"cannot include {', '.join(map(repr, unknown))} in search",
            hint=f"include may name: {', '.join(INCLUDABLE)}",
        )
    return (*SEARCHABLE_STATUSES, *dict.fromkeys(include))
