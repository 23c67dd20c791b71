"""The package's layering, read from the source with ``ast`` (nothing under ``memstrata/`` is imported).

Each top-level unit of ``memstrata`` (a sub-package ``memstrata/X/`` or a module ``memstrata/X.py``)
has a rank in ``RANKS``; imports go downward only.  The rules, one test each, every offender listed
so a failure reads as a to-do list (docs/architecture.md draws the same map):

a. no import of a higher rank, nor of a peer (another unit of the same rank); every unit is ranked;
b. no import cycle between modules;
c. no SQL driver (``sqlite3``, ``psycopg``) outside ``memstrata/store/``;
d. ``memstrata/store/`` imports none of retrieval, tiers, server, memory;
e. the adapters ``server``, ``cli``, ``client``, ``integrations`` never import ``memstrata.store``;
f. a private name (``_name``) is imported only inside its own package;
g. no module over ``MAX_LINES`` lines.

Imports are counted at any depth (inside functions too).  Imports under ``if TYPE_CHECKING:`` are
annotations only: rules a, b, d and e ignore them; c and f do not (a driver type or a private name
outside its home is a leak even when only a type checker reads it).  Dynamic imports
(``importlib.import_module``) are not seen.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memstrata"
ROOT = "memstrata"
MAX_LINES = 500

#: Rank of every top-level unit: ``memstrata.X`` may import ``memstrata.Y`` only when Y ranks lower.
#: ``""`` is the root package itself (``memstrata/__init__.py``, which re-exports ``MemoryOS``).
RANKS: dict[str, int] = {
    # 0 - the error tree, imported by everything
    "errors": 0,
    # 1 - plain values: the data model, settings, resource closing, API key hashing, shared limits
    "model": 1,
    "config": 1,
    "closing": 1,
    "keys": 1,
    "limits": 1,
    "version": 1,
    # 2 - text processing: terms, index body, embedding text; search filters
    "text": 2,
    "filters": 2,
    # 3 - state rules, the portable MemCube file format, the embedder and LLM Protocols and backends
    "lifecycle": 3,
    "memcube": 3,
    "embed": 3,
    "llm": 3,
    # 4 - storage: narrow Protocols (store/base.py, store/queue.py), the SQLite and PostgreSQL
    #     engines, the Redis task queue
    "store": 4,
    # 5 - retrieval over the store, readers (text -> findings), the task runner
    "retrieval": 5,
    "reader": 5,
    "scheduler": 5,
    # 6 - the memory tiers; the one wire shape of items and hits
    "tiers": 6,
    "wire": 6,
    # 7 - the core: MemoryOS and its parts
    "memory": 7,
    # 8 - adapters over the core (the framework integrations among them), and the root package
    "compat": 8,
    "eval": 8,
    "client": 8,
    "server": 8,
    "integrations": 8,
    "": 8,
    # 9 - the command line
    "cli": 9,
    # 10 - ``python -m memstrata``
    "__main__": 10,
}

SQL_DRIVERS = ("sqlite3", "psycopg")
STORE_FORBIDDEN = ("retrieval", "tiers", "server", "memory")  # rule d
ADAPTERS = ("server", "cli", "client", "integrations")  # rule e


@dataclass(frozen=True)
class Module:
    name: str  # dotted: memstrata.store.sqlite.store
    path: Path
    is_package: bool  # an __init__.py

    @property
    def where(self) -> str:
        return self.path.relative_to(PACKAGE.parent).as_posix()

    @property
    def package(self) -> str:
        """The package that owns the module's private names: its folder; a top-level module
        (``memstrata/text.py``) is a unit of its own, so it owns them alone."""
        if self.is_package:
            return self.name
        parent = self.name.rpartition(".")[0]
        return self.name if parent == ROOT else parent


@dataclass(frozen=True)
class Import:
    importer: Module
    line: int
    target: str  # the module imported, resolved to the deepest existing memstrata module if ours
    names: tuple[str, ...]  # ``from target import names``; () for ``import target``
    typing_only: bool

    @property
    def at(self) -> str:
        return f"{self.importer.where}:{self.line}"


@functools.cache
def modules() -> dict[str, Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = Module(".".join(parts), path, is_package)
    return found


def unit(name: str) -> str:
    """The top-level unit of a memstrata module: ``memstrata.store.base`` -> ``store``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def ours(name: str) -> bool:
    return name == ROOT or name.startswith(ROOT + ".")


def resolve(name: str) -> str:
    """The deepest existing memstrata module on the way to ``name``: ``from m import attr``
    counts as importing ``m``; a module that is gone keeps at least its top-level unit."""
    while name not in modules() and name.count(".") > 1:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, typing_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, True
                yield from _walk(stmt, True)
            for stmt in child.orelse:
                yield stmt, typing_only
                yield from _walk(stmt, typing_only)
        else:
            yield child, typing_only
            yield from _walk(child, typing_only)


def _base(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


@functools.cache
def imports() -> tuple[Import, ...]:
    """Every import in the package; ``from pkg import name`` counts as an import of ``pkg.name``
    when that is a module of ours (one record per such name), else of ``pkg``."""
    found = []
    for module in modules().values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        for node, typing_only in _walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = resolve(alias.name) if ours(alias.name) else alias.name
                    found.append(Import(module, node.lineno, target, (), typing_only))
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, node)
                plain = []
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if ours(base) and sub in modules():
                        found.append(Import(module, node.lineno, sub, (), typing_only))
                    else:
                        plain.append(alias.name)
                if plain:
                    target = resolve(base) if ours(base) else base
                    found.append(Import(module, node.lineno, target, tuple(plain), typing_only))
    return tuple(found)


def runtime_imports_of_ours() -> Iterator[Import]:
    return (i for i in imports() if ours(i.target) and not i.typing_only)


def check(title: str, offenders: list[str]) -> None:
    """Fail with every offender, one per line (no assertion rewriting noise)."""
    if offenders:
        pytest.fail(f"{title} ({len(offenders)}):\n  " + "\n  ".join(offenders), pytrace=False)


def _rank_name(name: str) -> str:
    return unit(name) or "the root package"


# -- a. ranks ----------------------------------------------------------------------------------


def test_every_top_level_unit_has_a_rank() -> None:
    units = sorted({unit(name) for name in modules()} - set(RANKS))
    check("top-level units missing from RANKS in tests/test_layering.py (place them)", units)


def test_imports_go_downward_only() -> None:
    offenders = []
    for imp in runtime_imports_of_ours():
        mine, theirs = unit(imp.importer.name), unit(imp.target)
        if mine == theirs or mine not in RANKS or theirs not in RANKS:
            continue
        if RANKS[theirs] > RANKS[mine]:
            why = "higher rank"
        elif RANKS[theirs] == RANKS[mine]:
            why = "peer"
        else:
            continue
        offenders.append(
            f"{imp.at} imports {imp.target}: {why} "
            f"({_rank_name(imp.importer.name)} {RANKS[mine]} -> {_rank_name(imp.target)} {RANKS[theirs]})"
        )
    check("imports that do not go downward", offenders)


# -- b. cycles ---------------------------------------------------------------------------------


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for imp in runtime_imports_of_ours():
        if imp.target in modules() and imp.target != imp.importer.name:
            graph[imp.importer.name].add(imp.target)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _shortest_cycle(graph: dict[str, set[str]], members: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    inside = set(members)
    start = members[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & inside):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    return members


def test_no_import_cycles() -> None:
    graph = _graph()
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1 or c[0] in graph[c[0]]]
    offenders = [
        f"{' -> '.join(_shortest_cycle(graph, c))}"
        + (f"  (one of {len(c)} modules in a cycle: {', '.join(c)})" if len(c) > 2 else "")
        for c in cycles
    ]
    check("import cycles, one path each", offenders)


# -- c, d, e. who may touch the store ----------------------------------------------------------


def test_no_sql_driver_outside_the_store() -> None:
    offenders = [
        f"{imp.at} imports {imp.target}"
        for imp in imports()
        if imp.target.split(".")[0] in SQL_DRIVERS and unit(imp.importer.name) != "store"
    ]
    check("SQL drivers imported outside memstrata/store/", offenders)


def test_the_store_imports_no_layer_above_it() -> None:
    offenders = [
        f"{imp.at} imports {imp.target}"
        for imp in runtime_imports_of_ours()
        if unit(imp.importer.name) == "store" and unit(imp.target) in STORE_FORBIDDEN
    ]
    check(f"memstrata/store/ importing {', '.join(STORE_FORBIDDEN)}", offenders)


def test_adapters_do_not_import_the_store() -> None:
    offenders = [
        f"{imp.at} imports {imp.target}"
        for imp in runtime_imports_of_ours()
        if unit(imp.importer.name) in ADAPTERS and unit(imp.target) == "store"
    ]
    check(f"adapters ({', '.join(ADAPTERS)}) importing memstrata.store", offenders)


# -- f. private names --------------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _home(name: str) -> str:
    """The package owning the private names of module ``name`` (see ``Module.package``)."""
    return modules()[name].package if name in modules() else name


def test_private_names_stay_in_their_package() -> None:
    offenders = []
    for imp in imports():
        if not ours(imp.target):
            continue
        if imp.names:  # from module import _name
            private = [n for n in imp.names if _private(n)]
            home = _home(imp.target)
        else:  # a private module: from package import _module, import package._module
            private = [p for p in imp.target.split(".") if _private(p)]
            home = _home(imp.target.rpartition(".")[0])
        if private and home != imp.importer.package:
            offenders.append(f"{imp.at} imports {', '.join(private)} from {imp.target}")
    check("private names imported from another package", offenders)


# -- g. size -----------------------------------------------------------------------------------


def test_modules_stay_small() -> None:
    sizes = {
        m.where: len(m.path.read_text(encoding="utf-8").splitlines()) for m in modules().values()
    }
    offenders = [
        f"{where}: {lines} lines"
        for where, lines in sorted(sizes.items(), key=lambda kv: -kv[1])
        if lines > MAX_LINES
    ]
    check(f"modules over {MAX_LINES} lines, largest first", offenders)
