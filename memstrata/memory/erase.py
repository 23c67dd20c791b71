"""Erasure: which items an ``erase`` call reaches, and who may ask for it.

The store removes the content (``Store.erase_items``); this module decides the scope:

* one item (needs ``write`` on its cube);
* a session of a cube (``session_id`` with ``cube_id``; needs ``write``);
* a whole cube (``cube_id`` alone; needs ``admin``): the cube and every row of it go, its events
  stay as tombstones;
* a data subject (``subject_user_id``): every item that user added (its ``user_id``); asked by
  that user or by an administrator (by that user only, when ``own_data_only``: how agents erase).
  An administrator's reaches every cube; the user's own reaches only the cubes they may write
  (``write`` or ``admin``), where they could erase any item one by one anyway, so that an item
  that merely claims them (a cube someone else filled) is never theirs to erase.  ``cube_id``
  narrows it to one cube (the user needs ``write`` on it).  Each cube that lost items records
  one ``erase_subject`` event besides the items' own ``erase`` events.

Derived items follow their sources: a fact, profile entry, preference, knowledge item or segment
that cites an erased item is erased too (its text was made from the erased words), and so on
transitively.  Pages that belonged to an erased segment stay (they are the user's own turns,
not derived from the segment).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from memstrata.errors import AdminRequired, CubeNotFound, OwnDataOnly, ValidationError
from memstrata.filters import Filters
from memstrata.memory.access import Access
from memstrata.model import DERIVED_TYPES, STATUSES, permits
from memstrata.store.base import ErasureScope, ItemStore


class Scope(NamedTuple):
    """What an ``erase`` call names: exactly one of item, session (with its cube), subject, or
    a cube alone (``cube_id`` also narrows an item or a subject to that cube)."""

    item_id: str | None
    session_id: str | None
    cube_id: str | None
    subject_user_id: str | None


def erase(
    store: ErasureScope,
    access: Access,
    user_id: str,
    scope: Scope,
    *,
    reason: str | None,
    own_data_only: bool = False,
    forget: Callable[[list[str]], None] | None = None,
) -> int:
    """Erase what ``scope`` names (see the module docstring); the number of items erased.

    ``forget`` is called with the cubes that lost items, after the erasure (so that what was
    computed from them elsewhere, a KV cache, goes too)."""
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
        cube_ids = _subject_cubes(store, access, user_id, subject, cube_id, own_data_only)
        found = _by_subject(store, subject, cube_ids)
    else:
        assert cube_id is not None
        access.cube(user_id, cube_id, "admin")
        return store.delete_cube(cube_id, user_id)
    ids = [i for cube, direct in found.items() for i in _with_derived(store, cube, direct)]
    count = store.erase_items(ids, list(found), user_id, reason, subject=subject)
    if forget is not None and count:
        forget(sorted(found))
    return count


def _subject_cubes(
    store: ErasureScope,
    access: Access,
    user_id: str,
    subject: str,
    cube_id: str | None,
    own_data_only: bool,
) -> list[str]:
    """The cubes a subject erasure by ``user_id`` reaches (see the module docstring)."""
    if own_data_only and subject != user_id:
        raise OwnDataOnly(user_id)
    access.user(subject)
    administrator = access.user(user_id).role == "admin"
    if user_id != subject and not administrator:
        raise AdminRequired(user_id)
    if cube_id is not None:
        if not administrator:
            access.cube(user_id, cube_id, "write")
        elif store.get_cube(cube_id) is None:
            raise CubeNotFound(cube_id)
        return [cube_id]
    held = store.cubes_with_items_of(subject)
    if administrator:
        return held
    return [c for c in held if permits(store.permission(c, user_id), "write")]


def _by_subject(store: ItemStore, subject: str, cube_ids: list[str]) -> dict[str, list[str]]:
    """Per cube of ``cube_ids``, the items ``subject`` added."""
    everything = Filters(statuses=STATUSES)
    return {
        c: [i.id for i in store.list_items(c, everything) if i.user_id == subject] for c in cube_ids
    }


def _with_derived(store: ItemStore, cube_id: str, ids: list[str]) -> list[str]:
    """``ids`` and every item of the cube derived from them, transitively."""
    gone = dict.fromkeys(ids)
    derived = store.list_items(cube_id, Filters(types=DERIVED_TYPES, statuses=STATUSES))
    grew = True
    while grew:
        grew = False
        for item in derived:
            if item.id not in gone and any(s.item_id in gone for s in item.sources):
                gone[item.id] = None
                grew = True
    return list(gone)
