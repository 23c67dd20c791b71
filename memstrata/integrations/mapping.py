"""How a framework's users, sessions, threads and namespaces become memstrata's users and cubes.

Every adapter of ``memstrata.integrations`` maps through these functions, so the rule is one:

* **The acting user is fixed when the adapter is made** (``user_id=``): every call it makes
  carries that id, so the core's grant checks are those of every other surface.  An adapter
  never reads a cube its user may not read.
* **The memory cube** (``user_cube``) is the cube named by ``cube_id=`` (created, owned by the
  user, when missing; one the user may not read is ``PermissionDenied``) or else the user's
  default cube.  What the framework asks to *remember* goes there, where search, context and
  the tiers see it.
* **A private cube** (``private_cube``) holds what only the adapter reads (LangGraph's
  checkpoints): its id is derived from the user id and a name, and it must be *owned* by the
  user: a cube of that id made by someone else (who could share it to read what is written) is
  ``PermissionDenied``, never used.
* **Framework ids become memstrata ids** (``line_id``): an id that is already a valid memstrata
  id (1-128 letters, digits and ``_ . : @ -``) is kept, so the session or thread is recognisable
  in the inspector; any other string is replaced by a stable digest of it.
* **Paths become metadata** (``path_metadata``, ``path_filter``, ``path_of``): a tuple of labels
  such as a LangGraph namespace is stored as one metadata key per level, so a prefix of it is
  a plain metadata equality filter the store answers in SQL.

Each function makes at most one ``MemoryOS`` call and decides no rule of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from memstrata.errors import PermissionDenied, ValidationError
from memstrata.limits import MAX_FILTER_KEYS
from memstrata.memory.access import check_id
from memstrata.memory.system import MemoryOS

#: Hex digits of SHA-256 kept in a derived id: 160 bits, no accidental collision.
DIGEST_CHARS = 40
#: Metadata filter keys a path prefix may use; the rest of a deeper prefix is compared in
#: Python (``path_matches``).  Two keys are left for the adapter's own markers.
PATH_FILTER_KEYS = MAX_FILTER_KEYS - 4


def digest(*parts: str) -> str:
    """A stable hex digest of ``parts`` (length-prefixed: ``("a", "bc")`` is not ``("ab", "c")``)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:DIGEST_CHARS]


def line_id(value: str, prefix: str) -> str:
    """``value`` when it is a valid memstrata id, else ``prefix-<digest of value>`` (stable)."""
    try:
        check_id(value, "id")
    except ValidationError:
        return f"{prefix}-{digest(value)}"
    return value


def user_cube(memory: MemoryOS, user_id: str, cube_id: str | None = None) -> str:
    """The memory cube of ``user_id``: ``cube_id`` (created, owned by the user, if missing) or
    the user's default cube; the user is created if missing.  ``PermissionDenied`` when the cube
    exists and the user may not read it; ``ValidationError`` for a malformed id."""
    return memory.attach(user_id, cube_id).cube_id


def private_cube(
    memory: MemoryOS,
    user_id: str,
    kind: str,
    name: str,
    *,
    settings: Mapping[str, Any] | None = None,
) -> str:
    """The id of ``user_id``'s own cube for ``name`` (``kind`` is a short prefix such as ``lgt``),
    created on first use with the tier ``settings``.  Its id is derived from the user and the
    name, so two users never share one; a cube of that id owned by anyone else is
    ``PermissionDenied``."""
    cube_id = f"{kind}-{digest(user_id, name)}"
    display = f"{kind} {name}"[:120].replace("\n", " ")
    cube = memory.attach(
        user_id, cube_id, name=display if display.strip() else kind, settings=settings
    )
    if cube.owner != user_id:  # another's cube, shared with the user: never write there
        raise PermissionDenied(user_id, cube_id, "own")
    return cube.cube_id


def path_metadata(key: str, path: Sequence[str]) -> dict[str, Any]:
    """Metadata recording ``path``: ``{key: [labels], key.depth: n, key.0: label0, …}``."""
    labels = list(path)
    out: dict[str, Any] = {key: labels, f"{key}.depth": len(labels)}
    out.update({f"{key}.{i}": label for i, label in enumerate(labels)})
    return out


def path_filter(key: str, prefix: Sequence[str], *, exact: bool = False) -> dict[str, Any]:
    """A metadata equality filter for paths starting with ``prefix`` (``exact``: equal to it).

    At most ``PATH_FILTER_KEYS`` levels go to the store; check deeper ones with
    ``path_matches``."""
    labels = list(prefix)[:PATH_FILTER_KEYS]
    out: dict[str, Any] = {f"{key}.{i}": label for i, label in enumerate(labels)}
    if exact:
        out[f"{key}.depth"] = len(prefix)
    return out


def path_of(key: str, metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The path ``path_metadata`` recorded under ``key``, or None when there is none."""
    labels = metadata.get(key)
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        return None
    return tuple(labels)


def path_matches(path: Sequence[str], prefix: Sequence[str], *, exact: bool = False) -> bool:
    """Whether ``path`` starts with (``exact``: equals) ``prefix``."""
    if exact:
        return tuple(path) == tuple(prefix)
    return tuple(path[: len(prefix)]) == tuple(prefix)
