"""The Protocol table of ``memstrata/store/base.py`` is checked against the Protocols themselves
(issue 28, §2: it was typed by hand and had drifted: ``SearchIndex`` said 4 calls and had 7)."""

from __future__ import annotations

import inspect
import re
from typing import Protocol

from memstrata.store import base

#: A row of the table: ``Name``, what, size (``+3`` for ``Store``: calls of its own).
ROW = re.compile(r"^``(\w+)``\s+.*?\s+(\+?\d+)$")


def own_calls(protocol: type) -> set[str]:
    """The calls a Protocol declares itself (not those it inherits)."""
    return {name for name, value in vars(protocol).items()
            if inspect.isfunction(value) and not name.startswith("_")}  # fmt: skip


def protocols() -> dict[str, type]:
    return {
        name: value
        for name, value in vars(base).items()
        if inspect.isclass(value) and value is not Protocol and Protocol in value.__mro__[1:]
        and value.__module__ == base.__name__
    }  # fmt: skip


def test_the_table_gives_each_protocol_and_its_size() -> None:
    """Issue 28, §2: the size table of store/base.py is tested, not trusted."""
    table = {m[1]: m[2] for line in (base.__doc__ or "").splitlines() if (m := ROW.match(line))}
    expected = {name: str(len(own_calls(p))) for name, p in protocols().items()}
    expected["Store"] = f"+{expected['Store']}"
    assert table == expected


def test_store_is_every_protocol_and_no_call_is_in_two() -> None:
    """Issue 28, §2: splitting a Protocol (the artifact calls off ``ArchiveStore``) keeps
    ``Store`` whole: every narrow Protocol is one of its bases, each call declared once."""
    narrow = {n: p for n, p in protocols().items() if n != "Store"}
    assert set(narrow.values()) <= set(base.Store.__mro__)
    seen: dict[str, str] = {}
    for name, protocol in narrow.items():
        for call in own_calls(protocol) - {"get_items", "next_turns"}:  # a ranking reads back
            assert call not in seen, f"{call} in {seen.get(call)} and {name}"
            seen[call] = name
