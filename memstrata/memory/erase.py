"""Erasure (DESIGN §5): which items an ``erase`` call reaches, and who may ask for it.

The store removes the content (``Store.erase_items``); this module decides the scope:

* one item (needs ``write`` on its cube);
* a session of a cube (``session_id`` with ``cube_id``; needs ``write``);
* a whole cube (``cube_id`` alone; needs ``admin``): the cube and every row of it go, its events
  stay as tombstones;
* a data subject (``subject_user_id``): every item that user added, in every cube; asked by
  that user or by an administrator (by that user only, when ``own_data_only``: how agents erase).

Derived items follow their sources: a fact, profile entry, preference, knowledge item or segment
that cites an erased item is erased too (its text was made from the erased words), and so on
transitively.  Pages that belonged to an erased segment stay (they are the user's own turns,
not derived from the segment).
"""

from __future__ import annotations

from typing import NamedTuple

from memstrata.errors import AdminRequired, OwnDataOnly, ValidationError
from memstrata.filters import Filters
from memstrata.memory.access import Access
from memstrata.model import STATUSES
from memstrata.store.base import Store

#: Types made from other items, which name them in ``sources``.
DERIVED = ("segment", "fact", "profile", "preference", "knowledge")


class Scope(NamedTuple):
    """What an ``erase`` call names: exactly one of item, session (with its cube), subject, or
    a cube alone (``cube_id`` also narrows an item or a subject to that cube)."""

    item_id: str | None
    session_id: str | None
    cube_id: str | None
    subject_user_id: str | None


def erase(
    store: Store,
    access: Access,
    user_id: str,
    scope: Scope,
    *,
    reason: str | None,
    own_data_only: bool = False,
) -> int:
    """Erase what ``scope`` names (see the module docstring); the number of items erased."""
    item_id, session_id, cube_id, subject = scope
    named = [item_id is not None, session_id is not None, subject is not None]
    if sum(named) > 1 or not (any(named) or cube_id is not None):
        raise ValidationError(
            "name exactly one thing to erase",
            hint="item_id, session_id with cube_id, cube_id alone, or subject_user_id",
        )
    if item_id is not None:
        item = access.item(item_id, user_id, "write", cube_id)
        found = {item.cube_id: [item.id]}
    elif session_id is not None:
        if cube_id is None:
            raise ValidationError("erasing a session needs its cube_id")
        access.cube(user_id, cube_id, "write")
        session = Filters(session_id=session_id, statuses=STATUSES)
        found = {cube_id: [i.id for i in store.list_items(cube_id, session)]}
    elif subject is not None:
        _check_subject(access, user_id, subject, own_data_only)
        found = _by_subject(store, subject, cube_id)
    else:
        assert cube_id is not None
        access.cube(user_id, cube_id, "admin")
        return store.delete_cube(cube_id, user_id)
    ids = [i for cube, direct in found.items() for i in _with_derived(store, cube, direct)]
    return store.erase_items(ids, user_id, reason)


def _check_subject(access: Access, user_id: str, subject: str, own_data_only: bool) -> None:
    """Pass when ``user_id`` may erase everything ``subject`` added."""
    if own_data_only and subject != user_id:
        raise OwnDataOnly(user_id)
    access.user(subject)
    if user_id != subject and access.user(user_id).role != "admin":
        raise AdminRequired(user_id)


def _by_subject(store: Store, subject: str, cube_id: str | None) -> dict[str, list[str]]:
    """Per cube, the items ``subject`` added (in ``cube_id`` only, when given)."""
    cube_ids = [cube_id] if cube_id is not None else store.cubes_with_items_of(subject)
    everything = Filters(statuses=STATUSES)
    return {
        c: [i.id for i in store.list_items(c, everything) if i.user_id == subject] for c in cube_ids
    }


def _with_derived(store: Store, cube_id: str, ids: list[str]) -> list[str]:
    """``ids`` and every item of the cube derived from them, transitively."""
    gone = dict.fromkeys(ids)
    derived = store.list_items(cube_id, Filters(types=DERIVED, statuses=STATUSES))
    grew = True
    while grew:
        grew = False
        for item in derived:
            if item.id not in gone and any(s.item_id in gone for s in item.sources):
                gone[item.id] = None
                grew = True
    return list(gone)
