"""Moving a whole memory from one database to another (``memstrata migrate``): SQLite to
PostgreSQL, or between any two stores.

What is copied: the database's embedder; every user; every API key (its hash, label, times and
revocation: keys keep working); every cube whole, as a MemCube export and import keeps it (items
with their ids, versions, vectors, events, artifacts' files) through ``ArchiveStore``; every
grant.  Each cube is written in one transaction, so an interrupted run leaves whole cubes or none
of one, and running it again skips what is there (users, keys, cubes, grants already copied):
it resumes.  At the end every cube's items are counted on both sides (``Migration.mismatches``).

Not copied, and why: the audit events that belong to no cube (users and keys created or revoked,
``vacuum``): they describe the source database, whose copy starts a history of its own with the
``import`` event of each cube; the LLM usage counters: they count calls made against the source
(the target counts its own from the copy on); queued background tasks: they live in the source's
queue (its ``tasks`` table or Redis) and name work the target redoes by itself — the next ``add``
to a cube queues its consolidation, and nothing queued carries data that is not in the items.  A
cube's events are copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace

from memstrata.config import Settings
from memstrata.errors import ConfigurationError
from memstrata.filters import Filters
from memstrata.memory.components import RUNTIME_META
from memstrata.memory.cubes import _insert
from memstrata.model import STATUSES
from memstrata.store.artifacts import KEY_META
from memstrata.store.base import Store
from memstrata.store.engines import open_store

#: Database settings copied with the memory: the embedder, the runtime settings, and the key that
#: seals the artifacts (without it every copied KV cache and adapter would be rebuilt).
COPIED_META = ("embedder", RUNTIME_META, KEY_META)
EVERY_STATUS = Filters(statuses=STATUSES)


@dataclass
class Migration:
    """What one run copied, skipped (copied by an earlier run) and found different at the end."""

    users: int = 0
    keys: int = 0
    cubes: int = 0
    grants: int = 0
    items: int = 0
    skipped_cubes: int = 0
    #: cube id → (items in the source, items in the target), for every cube that differs
    mismatches: dict[str, tuple[int, int]] = field(default_factory=dict)


@contextmanager
def opened(source: str, target: str, settings: Settings) -> Iterator[tuple[Store, Store]]:
    """The stores at two addresses (an SQLite file, ``sqlite:///path``, or a PostgreSQL DSN)."""
    addresses = [a.removeprefix("sqlite://") for a in (source, target)]
    if addresses[0] == addresses[1]:
        raise ConfigurationError("the source and the target are the same database")
    with ExitStack() as stack:
        stores = []
        for address in addresses:
            store = open_store(replace(settings, db=address))
            stack.callback(store.close)
            stores.append(store)
        yield stores[0], stores[1]


def cube_ids(store: Store) -> list[str]:
    """Every cube of ``store`` (each has its owner's grant), by id."""
    return sorted({c.cube_id for u in store.list_users() for c in store.list_cubes(u.user_id)})


def migrate(
    source: Store, target: Store, *, on_cube: Callable[[str], None] | None = None
) -> Migration:
    """Copy everything of ``source`` that ``target`` lacks (see the module doc); ``on_cube`` is
    told each cube id as it is done (a progress bar).  ``ConfigurationError`` when the two
    databases were made with different embedders."""
    done = Migration()
    _copy_meta(source, target)
    for user in source.list_users():
        if target.get_user(user.user_id) is None:
            target.put_user(user)
            done.users += 1
        known = {k.key_id for k in target.list_keys(user.user_id)}
        hashes = source.key_hashes(user.user_id)
        for key in source.list_keys(user.user_id):
            if key.key_id not in known:
                target.put_key(key, hashes[key.key_id])
                done.keys += 1
    for cube_id in cube_ids(source):
        if target.get_cube(cube_id) is None:
            data = source.read_cube(cube_id)
            _insert(target, data, data.cube.owner, {"migrated": True, "items": len(data.items)})
            done.cubes += 1
            done.items += len(data.items)
        else:
            done.skipped_cubes += 1
        held = {g.user_id: g for g in target.list_grants(cube_id)}
        for grant in source.list_grants(cube_id):
            if held.get(grant.user_id) != grant:  # the owner's, re-made by the import, too
                target.put_grant(grant)
                done.grants += 1
        if on_cube is not None:
            on_cube(cube_id)
    for cube_id in cube_ids(source):
        counts = (
            source.count_items(cube_id, EVERY_STATUS),
            target.count_items(cube_id, EVERY_STATUS),
        )
        if counts[0] != counts[1]:
            done.mismatches[cube_id] = counts
    return done


def _copy_meta(source: Store, target: Store) -> None:
    embedders = (source.get_meta("embedder"), target.get_meta("embedder"))
    if None not in embedders and embedders[0] != embedders[1]:
        raise ConfigurationError(
            f"the source was made with the {embedders[0]} embedder, the target with {embedders[1]}",
            hint="migrate into a new, empty database",
        )
    for key in COPIED_META:
        value = source.get_meta(key)
        if value is not None and target.get_meta(key) is None:
            target.set_meta(key, value)
