"""``GET /ui/cubes/{cube_id}/items/{item_id}/diff?a=&b=``: two versions of an item, word by word.

The versions come from ``MemoryOS.history`` (the core checks the grant); the text of version
``a`` is compared with that of ``b`` by ``difflib`` on words (whitespace kept), the words only in
``a`` shown struck out (``<del>``), those only in ``b`` underlined (``<ins>``), all escaped.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Annotated

from fastapi import APIRouter, Query, Response

from memstrata.errors import NotFoundError
from memstrata.model import Version
from memstrata.server.ui import parts
from memstrata.server.ui.markup import Markup, join, tag
from memstrata.server.ui.visit import UIRoute, Visitor

router = APIRouter(route_class=UIRoute, include_in_schema=False)
Param = Annotated[str, Query()]
_WORDS = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> Markup:
    """``old`` → ``new`` as HTML: kept words as text, removed in ``<del>``, added in ``<ins>``."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    out: list[Markup] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(join(a[i1:i2]))
            continue
        if i2 > i1:
            out.append(tag("del", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(tag("ins", "".join(b[j1:j2])))
    return join(out)


@router.get("/ui/cubes/{cube_id}/items/{item_id}/diff")
def diff(cube_id: str, item_id: str, visit: Visitor, a: Param = "", b: Param = "") -> Response:
    """Version ``a`` against version ``b`` (by default the one before the current, and it)."""
    versions = visit.memory.history(item_id, user_id=visit.user.user_id, cube_id=cube_id)
    numbers = [v.version for v in versions]
    if not numbers:  # an erased item keeps no version
        raise NotFoundError("the item has no version to compare")
    old = _version(versions, a, numbers[-2] if len(numbers) > 1 else numbers[-1])
    new = _version(versions, b, numbers[-1])
    body = [
        parts.cube_tabs(cube_id),
        tag("p", tag("a", "← the item", href=parts.item_url(cube_id, item_id))),
        version_form(cube_id, item_id, numbers, old.version, new.version),
        tag("p", f"version {old.version} ({parts.when(old.at)}, {old.actor}) → "
                 f"version {new.version} ({parts.when(new.at)}, {new.actor})", class_="muted"),
        tag("div", word_diff(old.item.text, new.item.text), class_="text diff"),
    ]  # fmt: skip
    return visit.page(f"Versions of {item_id}", join(body))


def _version(versions: list[Version], raw: str, default: int) -> Version:
    if not raw:
        raw = str(default)
    wanted = parts.whole_number(raw, "version")
    for version in versions:
        if version.version == wanted:
            return version
    raise NotFoundError(f"the item has no version {wanted}")


def version_form(cube_id: str, item_id: str, numbers: list[int], a: int, b: int) -> Markup:
    """The form choosing two versions to compare."""

    def pick(name: str, chosen: int) -> Markup:
        options = [tag("option", n, value=n, selected=n == chosen) for n in numbers]
        return tag("label", name, tag("select", *options, name=name))

    return tag(
        "form",
        pick("a", a),
        pick("b", b),
        tag("button", "Compare", type="submit"),
        method="get",
        action=parts.item_url(cube_id, item_id, "diff"),
        class_="bar",
    )
