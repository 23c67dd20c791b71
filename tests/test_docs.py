"""Documentation that cannot drift: a setting, CLI command, REST route, MCP tool or resource, or a
top-level unit of the package that the docs do not name fails here (datasette's and
sqlite-utils' ``test_docs.py`` do the same)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import click
from mcp.server.mcpserver import MCPServer

from memstrata import MemoryOS
from memstrata.cli import cli
from memstrata.config import Settings
from memstrata.server.mcp import Caller, build_server
from memstrata.server.rest import create_app

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_every_setting_is_documented() -> None:
    text = _doc("configuration.md")
    missing = [f.name for f in dataclasses.fields(Settings) if f"| `{f.name}` |" not in text]
    assert missing == []


# The README's examples (and every other shell and Python block of the docs) are run, the
# README's twice, by tests/test_doc_blocks.py.


# -- the command line --------------------------------------------------------------------------


def _commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    """``("memstrata users create", command)`` for the group and every command under it."""
    yield " ".join(("memstrata", *path)), command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            if not sub.hidden:
                yield from _commands(sub, (*path, name))


def _cli_sections() -> dict[str, str]:
    """docs/cli.md's sections by the command their heading names (``### `memstrata add```)."""
    sections: dict[str, str] = {}
    current = None
    for line in _doc("cli.md").splitlines():
        if line.startswith("#"):
            named = re.fullmatch(r"#+ `(memstrata[a-z -]*)`", line)
            current = named.group(1) if named else None
            if current:
                sections[current] = ""
        elif current:
            sections[current] += line + "\n"
    return sections


def _cli_rows() -> set[str]:
    rows = (line for line in _doc("cli.md").splitlines() if line.startswith("|"))
    return {name for row in rows for name in re.findall(r"`(memstrata[a-z -]*)`", row)}


def test_every_cli_command_is_documented() -> None:
    named = set(_cli_sections()) | _cli_rows()
    missing = [path for path, _ in _commands(cli) if path not in named]
    assert missing == [], "add a section '### `memstrata …`' to docs/cli.md for each"


def test_every_cli_option_is_documented() -> None:
    sections = _cli_sections()
    missing = [
        f"{path} {option}"
        for path, command in _commands(cli)
        if path in sections
        for param in command.params
        for option in (*param.opts, *param.secondary_opts)
        if option.startswith("--") and option != "--help"
        if not re.search(rf"(?<![\w-]){option}(?![\w-])", sections[path])
    ]
    assert missing == [], "name each option in its command's section of docs/cli.md"


# -- REST --------------------------------------------------------------------------------------


def test_every_rest_route_is_documented(tmp_path: Path) -> None:
    """``METHOD /path`` of every route of the OpenAPI description (which leaves out FastAPI's
    own ``/docs`` and ``/openapi.json``), in backticks, as a whole path (``?query`` may follow)."""
    with MemoryOS.open(str(tmp_path / "m.db"), workers=0) as memory:
        paths = create_app(memory).openapi()["paths"]
    text = _doc("rest.md")
    routes = [f"{method.upper()} {path}" for path, ops in paths.items() for method in ops]
    assert len(routes) > 20
    missing = [r for r in routes if not re.search(re.escape(f"`{r}") + r"[`?\s]", text)]
    assert missing == [], "document each in docs/rest.md as `METHOD /path`"


# -- MCP ---------------------------------------------------------------------------------------


async def _mcp_names(server: MCPServer) -> list[str]:
    tools = [tool.name for tool in await server.list_tools()]
    resources = [str(resource.uri) for resource in await server.list_resources()]
    templates = [t.uri_template for t in await server.list_resource_templates()]
    return tools + resources + templates


def test_every_mcp_tool_and_resource_is_documented(tmp_path: Path) -> None:
    with MemoryOS.open(str(tmp_path / "m.db"), workers=0) as memory:
        memory.create_user("alice")
        server = build_server(memory, Caller(memory, "alice"))
        names = asyncio.run(_mcp_names(server))
    text = _doc("mcp.md")
    assert "add_memory" in names and "memstrata://profile" in names
    missing = [name for name in names if f"`{name}`" not in text]
    assert missing == [], "document each in docs/mcp.md, in backticks"


# -- the architecture --------------------------------------------------------------------------


def test_every_top_level_unit_is_on_the_map() -> None:
    """docs/architecture.md names each folder (``memory/``) and module (``limits.py``) of the
    package, in backticks (tests/test_layering.py gives each its rank)."""
    package = DOCS.parent / "memstrata"
    units = [f"{p.parent.name}/" for p in package.glob("*/__init__.py")]
    units += [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    text = _doc("architecture.md")
    assert len(units) > 20
    missing = sorted(u for u in units if f"`{u}`" not in text)
    assert missing == [], "place each in docs/architecture.md"


def test_the_schema_versions_are_the_codes() -> None:
    """docs/storage.md gives each engine's schema version and lists every SQLite migration (it
    said version 4 when the code was at 7)."""
    from memstrata.store.postgres import schema as pg_schema
    from memstrata.store.sqlite import schema as sqlite_schema

    text = _doc("storage.md")
    assert f"The schema is at\nversion {sqlite_schema.LATEST} (`LATEST`" in text
    assert (
        f"at version {pg_schema.LATEST} (`LATEST` in `memstrata/store/postgres/schema.py`" in text
    )
    rows = re.findall(r"^\| (\d+) \| ", text.split("## Migrations")[1], re.MULTILINE)
    assert [int(r) for r in rows] == list(range(1, sqlite_schema.LATEST + 1))


def test_every_task_kind_is_documented(tmp_path: Path) -> None:
    """docs/scheduler.md names each task kind a MemoryOS registers, in backticks."""
    with MemoryOS.open(str(tmp_path / "kinds.db"), workers=0) as memory:
        kinds = memory._parts.scheduler.kinds
    assert len(kinds) >= 5
    missing = [k for k in kinds if f"`{k}`" not in _doc("scheduler.md")]
    assert missing == [], "describe each task kind in docs/scheduler.md"


def test_every_core_module_and_server_folder_is_on_the_map() -> None:
    """docs/architecture.md names each module of ``memory/`` and each folder of ``server/``."""
    package = DOCS.parent / "memstrata"
    modules = [p.name for p in (package / "memory").glob("*.py") if p.name != "__init__.py"]
    folders = [f"{p.parent.name}/" for p in (package / "server").glob("*/__init__.py")]
    text = _doc("architecture.md")
    missing = sorted(u for u in modules + folders if f"`{u}`" not in text)
    assert missing == [], "place each in docs/architecture.md"
