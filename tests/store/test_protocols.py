"""The Protocol table of ``memstrata/store/base.py`` is checked against the Protocols themselves
(issue 28, §2: it was typed by hand and had drifted: ``SearchIndex`` said 4 calls and had 7)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
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
    expected = {name: str(len(own_calls(p))) for name, p in protocols().items() if own_calls(p)}
    expected["Store"] = f"+{expected['Store']}"
    assert table == expected


def test_store_is_every_protocol_and_no_call_is_in_two() -> None:
    """Issue 28, §2: splitting a Protocol (the artifact calls off ``ArchiveStore``) keeps
    ``Store`` whole: every narrow Protocol is one of its bases, each call declared once."""
    narrow = {n: p for n, p in protocols().items() if n != "Store" and own_calls(p)}
    assert set(narrow.values()) <= set(base.Store.__mro__)
    seen: dict[str, str] = {}
    for name, protocol in narrow.items():
        # a ranking reads back items, next turns and (pseudo-relevance feedback) vectors
        for call in own_calls(protocol) - {"get_items", "next_turns", "get_vectors"}:
            assert call not in seen, f"{call} in {seen.get(call)} and {name}"
            seen[call] = name


#: A line of the module docstring's intersection list: ``Name`` = ``Base`` + ``Base``...: use.
INTERSECTION = re.compile(r"^\* ``(\w+)`` = ((?:``\w+``(?: \+ )?)+):")


def intersections() -> dict[str, type]:
    """The Protocols of store/base.py that declare nothing: each is what one use needs."""
    return {n: p for n, p in protocols().items() if not own_calls(p)}


def test_the_intersection_list_gives_each_one_and_its_bases() -> None:
    """Issue 28, §2: each intersection is listed with the Protocols it joins, as declared."""
    listed = {
        m[1]: re.findall(r"``(\w+)``", m[2])
        for line in (base.__doc__ or "").splitlines()
        if (m := INTERSECTION.match(line))
    }
    declared = {
        name: [b.__name__ for b in p.__bases__ if b is not Protocol]
        for name, p in intersections().items()
    }
    assert listed == declared


def test_a_store_is_each_intersection() -> None:
    """An intersection joins only Protocols ``Store`` is made of, so a ``Store`` is each one
    (and adds no call a backend would have to implement besides)."""
    for name, protocol in intersections().items():
        joined = {p for p in protocol.__mro__[1:] if p in protocols().values() and own_calls(p)}
        assert joined <= set(base.Store.__mro__), name
        assert len(joined) >= 2, f"{name} joins one Protocol: use that one"


# The consumers are typed by the Protocols they use (issue 28, §2): read from the source.
PACKAGE = Path(base.__file__).resolve().parent.parent
#: The folders whose modules consume the store.
CONSUMERS = ("memory", "tiers")
#: Modules there that may take the whole ``Store`` in an annotation, and why.
WHOLE_STORE = {
    "memory/components.py": "the core's parts: the store every part is built from, its settings",
    "memory/system.py": "MemoryOS opens the store, hands it to its parts and closes it",
    "memory/migration.py": "copies every table of one store into another (it uses them all)",
}


def store_annotations(path: Path) -> list[int]:
    """The lines where an annotation of ``path`` (a parameter, a return, a variable or an
    attribute) names ``Store`` itself, bare, dotted or in a string, or where ``Store`` is
    imported by name (an alias would hide it from the annotations)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and any(a.name == "Store" for a in node.names):
            found.append(node.lineno)
            continue
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotations = [node.annotation]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations = [node.returns]
        else:
            continue
        if any(a is not None and _names_store(a) for a in annotations):
            found.append(node.lineno)
    return sorted(found)


def _names_store(annotation: ast.expr) -> bool:
    """Whether ``annotation`` names ``Store``; a string annotation is read as the expression
    it holds."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            inner = ast.parse(node.value, mode="eval").body
            if _names_store(inner):
                return True
        elif (node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)) == "Store":
            return True
    return False


def consumer_modules() -> dict[str, Path]:
    return {
        path.relative_to(PACKAGE).as_posix(): path
        for folder in CONSUMERS
        for path in sorted((PACKAGE / folder).rglob("*.py"))
    }


def test_consumers_take_the_protocols_they_use_not_the_whole_store() -> None:
    """Issue 28, §2: no module of memory/ or tiers/ annotates ``Store`` (a parameter, an
    attribute, a return) unless ``WHOLE_STORE`` says why it needs the whole of it; every
    offender is listed."""
    offenders = [
        f"memstrata/{name}:{line}"
        for name, path in consumer_modules().items()
        if name not in WHOLE_STORE
        for line in store_annotations(path)
    ]
    assert offenders == [], "type these by the Protocols they use (store/base.py)"


def test_the_whole_store_allowlist_is_current() -> None:
    """A module of ``WHOLE_STORE`` that no longer names ``Store`` leaves the list."""
    modules = consumer_modules()
    stale = [n for n in WHOLE_STORE if n not in modules or not store_annotations(modules[n])]
    assert stale == []


def test_the_check_sees_every_spelling_of_store(tmp_path: Path) -> None:
    """The scan finds ``Store`` imported (aliased too), as a parameter, a dotted name, inside a
    union or a string, a return and an attribute; a narrow Protocol whose name ends in Store
    is not it."""
    source = """
from memstrata.store.base import ItemStore, Store as S
def a(store: Store) -> None: ...
def b(store: base.Store | None) -> None: ...
def c(store: "Store") -> None: ...
def d() -> list[Store]: ...
class E:
    store: Store
def f(store: ItemStore, other: "ErasureStore") -> ArtifactStore: ...
"""
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert store_annotations(path) == [2, 3, 4, 5, 6, 8]
