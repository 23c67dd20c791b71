"""The ``memstrata`` command line: a thin adapter over ``MemoryOS`` (parse → core → render).

Every command opens the database named by the global options (``--db``, ``--config``,
``--embedder``), calls one ``MemoryOS`` method and prints the result: short aligned lines by
default, JSON with ``--json``.  Failures never print a traceback: a ``MemstrataError`` is one
``error: …`` line on stderr and exit status 1, a usage error one such line and status 2.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Concatenate, NoReturn, ParamSpec, TypeVar

import click
from click.exceptions import NoArgsIsHelpError

from memstrata.cli import demo as demo_module
from memstrata.cli import render
from memstrata.cli.cube import export_command, import_command
from memstrata.cli.mcp import mcp as mcp_command
from memstrata.cli.serve import serve
from memstrata.config import Settings
from memstrata.embed import EMBEDDERS
from memstrata.errors import MemstrataError
from memstrata.eval import locomo
from memstrata.llm import make_llm
from memstrata.memory.system import MemoryOS
from memstrata.model import CUBE_KINDS, PERMISSIONS, ROLES

P = ParamSpec("P")
R = TypeVar("R")

_FILTER_KEYS = ("session_id", "tier", "type", "status", "since", "until")
_LIST_FILTERS = ("tier", "type", "status")
TEXT_WIDTH = 100


@dataclass(frozen=True)
class _Options:
    """The global options; ``db=None`` means whatever ``Settings`` picks."""

    db: str | None = None
    config: str | None = None
    embedder: str | None = None
    as_json: bool = False

    def open(self, db: str | None = None, **overrides: Any) -> MemoryOS:
        """A ``MemoryOS`` on ``db`` (default: the ``--db`` option, else ``Settings``' db).

        Background tasks run inline unless ``overrides`` say otherwise: a command is a short
        process, and its consolidation should be done when it exits.
        """
        settings = Settings.load(
            self.config, db=db or self.db, embedder=self.embedder, **{"workers": 0, **overrides}
        )
        return MemoryOS.open(settings=settings)


class _Group(click.Group):
    """The root group: runs click with ``standalone_mode=False`` and renders every failure."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; in standalone mode always exits, never with a traceback for bad input.

        Exit status: 0 on success (and for bare help), 1 for a ``MemstrataError`` or an abort,
        2 for a usage error.  With ``standalone_mode=False`` exceptions propagate as in click.
        """
        run: Callable[[], object] = functools.partial(
            super().main, args, prog_name, complete_var, False, windows_expand_args, **extra
        )
        if not standalone_mode:
            return run()
        try:
            code = run()
        except MemstrataError as exc:
            _fail(str(exc), 1)
        except NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help())
            code = 0
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            _fail(exc.format_message() + hint, exc.exit_code)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except click.exceptions.Abort:
            _fail("aborted", 1)
        sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit with ``code``."""
    click.echo("error: " + " ".join(message.splitlines()), err=True)
    sys.exit(code)


# -- output ----------------------------------------------------------------------------------


def _options() -> _Options:
    return click.get_current_context().find_object(_Options) or _Options()


def _emit(value: object, lines: Iterable[str]) -> None:
    """Print ``value`` as JSON under ``--json``, else the human-readable ``lines``."""
    if _options().as_json:
        click.echo(render.to_json(value))
    else:
        for line in lines:
            click.echo(line)


# -- shared options --------------------------------------------------------------------------


def _with_memory(command: Callable[Concatenate[MemoryOS, P], R]) -> Callable[P, R]:
    """Call ``command`` with an open ``MemoryOS`` first; it is closed when the command ends."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        ctx = click.get_current_context()
        return command(ctx.with_resource(_options().open()), *args, **kwargs)

    return wrapper


_user = click.option(
    "--user", "user_id", required=True, metavar="USER", help="Acting user; its grants are checked."
)
_reason = click.option("--reason", help="Why; kept in the history.")


def _json_or_text(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _parse_filters(
    ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]
) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a filter mapping (tier/type/status may repeat; see ``search``)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE")
        if key.startswith("metadata."):
            out.setdefault("metadata", {})[key.removeprefix("metadata.")] = _json_or_text(value)
        elif key in _LIST_FILTERS:
            out.setdefault(key, []).append(value)
        elif key not in _FILTER_KEYS:
            known = ", ".join([*_FILTER_KEYS, "metadata.KEY"])
            raise click.BadParameter(f"unknown filter key {key!r} (known: {known})")
        elif key in out:
            raise click.BadParameter(f"filter key {key!r} given twice")
        else:
            out[key] = value
    return out


# -- commands --------------------------------------------------------------------------------


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="SQLite database file  [default: $MEMSTRATA_DB, else memstrata.db in the user data dir]",
)
@click.option("--config", type=click.Path(dir_okay=False), help="TOML settings file.")
@click.option(
    "--embedder",
    type=click.Choice(EMBEDDERS),
    help="Embedder  [default: the one the database was created with; e5 for a new one]",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.version_option(package_name="memstrata")
@click.pass_context
def cli(
    ctx: click.Context, db: str | None, config: str | None, embedder: str | None, as_json: bool
) -> None:
    """memstrata: long-term memory for LLM agents, offline by default.

    Start with `memstrata demo`.
    """
    ctx.obj = _Options(db, config, embedder, as_json)


@cli.group()
def users() -> None:
    """Create and list users."""


@users.command("create")
@click.argument("user_id")
@click.option("--name", help="Display name.")
@click.option("--role", type=click.Choice(ROLES), default="user", show_default=True)
@_with_memory
def users_create(memory: MemoryOS, user_id: str, name: str | None, role: str) -> None:
    """Create the user USER_ID."""
    user = memory.create_user(user_id, name=name, role=role)
    _emit(user, render.table([render.user_row(user)]))


@users.command("list")
@_with_memory
def users_list(memory: MemoryOS) -> None:
    """List every user, oldest first."""
    found = memory.list_users()
    _emit(found, render.table(map(render.user_row, found)))


@users.command("create-key")
@click.argument("user_id")
@click.option("--label", help="What the key is for (shown in key lists).")
@_with_memory
def users_create_key(memory: MemoryOS, user_id: str, label: str | None) -> None:
    """Create an API key for USER_ID and print it (it is shown this once)."""
    key = memory.create_key(user_id, by=user_id, label=label)
    _emit({"key_id": key.key_id, "key": key.secret}, [f"{key.key_id}  {key.secret}"])


@users.command("keys")
@click.argument("user_id")
@_with_memory
def users_keys(memory: MemoryOS, user_id: str) -> None:
    """List USER_ID's API keys (ids and labels; the keys themselves are not stored)."""
    found = memory.list_keys(user_id, by=user_id)
    shown = [{k: v for k, v in vars(key).items() if k != "secret"} for key in found]
    _emit(shown, render.table(map(render.key_row, found)))


@users.command("revoke-key")
@click.argument("user_id")
@click.argument("key_id")
@_with_memory
def users_revoke_key(memory: MemoryOS, user_id: str, key_id: str) -> None:
    """Revoke USER_ID's API key KEY_ID."""
    memory.revoke_key(user_id, key_id, by=user_id)
    _emit({"revoked": key_id}, [f"revoked key {key_id}"])


@cli.group()
def cubes() -> None:
    """Create, list, share and re-embed memory cubes."""


@cubes.command("create")
@click.argument("name")
@click.option("--owner", required=True, metavar="USER", help="Owning user (gets admin).")
@click.option("--cube-id", metavar="ID", help="Id of the new cube  [default: generated]")
@click.option("--kind", type=click.Choice(CUBE_KINDS), default="user", show_default=True)
@_with_memory
def cubes_create(memory: MemoryOS, name: str, owner: str, cube_id: str | None, kind: str) -> None:
    """Create a cube called NAME."""
    cube = memory.create_cube(name, owner=owner, cube_id=cube_id, kind=kind)
    _emit(cube, render.table([render.cube_row(cube)]))


@cubes.command("list")
@_user
@_with_memory
def cubes_list(memory: MemoryOS, user_id: str) -> None:
    """List the cubes USER may read, oldest first."""
    found = memory.list_cubes(user_id=user_id)
    _emit(found, render.table(map(render.cube_row, found)))


@cubes.command("grant")
@click.argument("cube_id")
@click.argument("user_id")
@click.argument("permission", type=click.Choice(PERMISSIONS))
@click.option("--by", required=True, metavar="USER", help="Granting user; needs admin on the cube.")
@_with_memory
def cubes_grant(memory: MemoryOS, cube_id: str, user_id: str, permission: str, by: str) -> None:
    """Give USER_ID PERMISSION (read, write or admin) on CUBE_ID."""
    grant = memory.grant(cube_id, user_id, permission, by=by)
    _emit(grant, [f"granted {grant.permission} on cube {grant.cube_id} to {grant.user_id}"])


@cubes.command("reembed")
@click.argument("cube_id")
@_user
@_with_memory
def cubes_reembed(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    """Re-embed every item of CUBE_ID with the current embedder (needs admin)."""
    count = memory.reembed(cube_id, user_id=user_id)
    _emit({"cube_id": cube_id, "items": count}, [f"re-embedded {count} items in {cube_id}"])


def _messages(text: str | None, file: IO[str] | None, **fields: str | None) -> Any:
    """What ``MemoryOS.add`` gets: TEXT as one message with ``fields``, or the --file's JSON.

    The core validates the result; this only refuses ambiguous or unreadable input.
    """
    given = {key: value for key, value in fields.items() if value is not None}
    if (text is None) == (file is None):
        raise click.UsageError("give either TEXT or --file")
    if file is None:
        return [{"content": text, **given}] if given else text
    if given:
        raise click.UsageError("--role, --name, --timestamp and --id apply to TEXT, not --file")
    try:
        return json.load(file)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="'--file'") from exc


@cli.command()
@click.argument("text", required=False)
@_user
@click.option(
    "--cube", "cube_id", required=True, metavar="CUBE", help="Cube to add to (needs write)."
)
@click.option("--session", "session_id", metavar="ID", help="Session id for the new items.")
@click.option("--role", metavar="ROLE", help="Role of TEXT's speaker  [default: user]")
@click.option("--name", metavar="NAME", help="Speaker of TEXT.")
@click.option("--timestamp", metavar="TIME", help="When TEXT was said (ISO 8601)  [default: now]")
@click.option(
    "--id", "external_id", metavar="ID", help="Your own id for TEXT (re-adding it is a no-op)."
)
@click.option(
    "--file",
    type=click.File("r", encoding="utf-8"),
    metavar="FILE",
    help="JSON list of messages (role, content, name, timestamp, id, metadata); - for stdin.",
)
@click.option(
    "--document",
    type=click.Path(exists=True, dir_okay=False),
    metavar="PATH",
    help="A .txt, .md, .json or .pdf file, stored as chunks.",
)
@_with_memory
def add(
    memory: MemoryOS,
    text: str | None,
    user_id: str,
    cube_id: str,
    session_id: str | None,
    role: str | None,
    name: str | None,
    timestamp: str | None,
    external_id: str | None,
    file: IO[str] | None,
    document: str | None,
) -> None:
    """Remember TEXT (or every message of --file, or the chunks of --document); prints the new
    item ids in order."""
    if document is not None:
        if text is not None or file is not None:
            raise click.UsageError("give one of TEXT, --file or --document")
        path = Path(document)
        ids = memory.add_document(
            path.read_bytes(), filename=path.name, user_id=user_id, cube_id=cube_id,
            session_id=session_id,
        )  # fmt: skip
        _emit(ids, ids)
        return
    messages = _messages(text, file, role=role, name=name, timestamp=timestamp, id=external_id)
    ids = memory.add(messages, user_id=user_id, cube_id=cube_id, session_id=session_id)
    _emit(ids, ids)


@cli.command()
@click.argument("query")
@_user
@click.option(
    "--cube",
    "cube_ids",
    multiple=True,
    metavar="CUBE",
    help="Cube to search (repeatable)  [default: all readable]",
)
@click.option("--top-k", default=10, metavar="N", show_default=True, help="Number of hits.")
@click.option(
    "--filter",
    "filters",
    multiple=True,
    callback=_parse_filters,
    metavar="KEY=VALUE",
    help="Repeatable. KEY: session_id, tier, type, status, since, until (ISO 8601), or "
    "metadata.KEY for equality (VALUE parsed as JSON when it parses).",
)
@_with_memory
def search(
    memory: MemoryOS,
    query: str,
    user_id: str,
    cube_ids: tuple[str, ...],
    top_k: int,
    filters: dict[str, Any],
) -> None:
    """Hybrid (keyword + vector) search for QUERY, best first: score, id, when, who, text."""
    hits = memory.search(
        query, user_id=user_id, cube_ids=list(cube_ids) or None, top_k=top_k, filters=filters
    )
    _emit(hits, render.table(map(render.hit_row, hits)))


@cli.command()
@click.argument("query")
@_user
@click.option(
    "--cube", "cube_id", required=True, metavar="CUBE", help="Cube that keeps the exchange."
)
@click.option("--session", "session_id", metavar="ID", help="Session of the exchange.")
@click.option("--budget", default=1000, show_default=True, metavar="TOKENS", help="Context size.")
@click.option("--stream/--no-stream", default=True, show_default=True, help="Print as it comes.")
@_with_memory
def chat(
    memory: MemoryOS,
    query: str,
    user_id: str,
    cube_id: str,
    session_id: str | None,
    budget: int,
    stream: bool,
) -> None:
    """Ask the chat model QUERY with memory as context; the exchange is remembered.

    Needs a chat model (MEMSTRATA_LLM_PROVIDER=openai|local, see docs/configuration.md).
    """
    kwargs: dict[str, Any] = {"user_id": user_id, "cube_id": cube_id, "session_id": session_id}
    if stream and not _options().as_json:
        for piece in memory.chat_stream(query, budget_tokens=budget, **kwargs):
            click.echo(piece, nl=False)
        click.echo()
        return
    reply = memory.chat(query, budget_tokens=budget, **kwargs)
    _emit({"answer": reply.answer, "ids": reply.ids}, [reply.answer])


@cli.command()
@click.argument("item_id")
@_user
@_with_memory
def get(memory: MemoryOS, item_id: str, user_id: str) -> None:
    """Show the current version of ITEM_ID."""
    item = memory.get(item_id, user_id=user_id)
    _emit(item, render.item_lines(item))


@cli.command()
@click.argument("item_id")
@_user
@_with_memory
def history(memory: MemoryOS, item_id: str, user_id: str) -> None:
    """Every version of ITEM_ID, oldest first: version, when, who, status, text."""
    versions = memory.history(item_id, user_id=user_id)
    _emit(versions, render.table(map(render.version_row, versions)))


@cli.command()
@click.argument("item_id")
@_user
@click.option("--text", required=True, help="The new text.")
@_reason
@_with_memory
def update(memory: MemoryOS, item_id: str, user_id: str, text: str, reason: str | None) -> None:
    """Write a new version of ITEM_ID with new text."""
    item = memory.update(item_id, user_id=user_id, text=text, reason=reason)
    _emit(item, render.item_lines(item))


@cli.command()
@click.argument("item_id")
@_user
@_reason
@_with_memory
def delete(memory: MemoryOS, item_id: str, user_id: str, reason: str | None) -> None:
    """Soft-delete ITEM_ID: out of search, history kept."""
    item = memory.delete(item_id, user_id=user_id, reason=reason)
    _emit(item, [f"deleted {item.id} (version {item.version})"])


# -- demo ------------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    help="Keep the demo in this file  [default: the global --db, else a temporary file]",
)
def demo(db_path: str | None) -> None:
    """Ingest a sample conversation, then run a few searches and show the top 3 hits of each.

    Writes user and cube ``demo``; without any --db the database is temporary (MEMSTRATA_DB is
    deliberately not used, so a demo never lands in your real memory).
    """
    options = _options()
    kept = db_path or options.db
    with contextlib.ExitStack() as stack:
        memory = stack.enter_context(options.open(kept or demo_module.temporary_db(stack)))
        added = demo_module.ingest_sample(memory)
        results = [
            demo_module.demo_search(memory, query, filters)
            for query, filters in demo_module.DEMO_SEARCHES
        ]
        _emit(
            {"db": kept, "added": added, "searches": results},
            demo_module.demo_lines(kept, added, results),
        )


@cli.group(name="eval")
def eval_group() -> None:
    """Measure memstrata on benchmark data."""


@eval_group.command("locomo")
@click.option(
    "--data", required=True, type=click.Path(exists=True, dir_okay=False), help="LoCoMo JSON file."
)
@click.option(
    "--tiers/--no-tiers",
    default=True,
    show_default=True,
    help="Consolidate into tiers, or keep every turn in the working tier (raw-turn search).",
)
@click.option("--conversations", type=click.IntRange(min=1), help="Only the first N samples.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@click.option(
    "--llm-provider",
    type=click.Choice(["none", "openai", "local"]),
    help="Chat model that answers each question from its context, scored by F1 and BLEU-1 "
    "(default: the configured llm_provider; none: recall only).",
)
@click.option("--llm-base-url", help="OpenAI-compatible base URL (…/v1) of that model.")
@click.option("--llm-model", help="Model name at that endpoint.")
def eval_locomo(
    data: str,
    tiers: bool,
    conversations: int | None,
    out: str | None,
    llm_provider: str | None,
    llm_base_url: str | None,
    llm_model: str | None,
) -> None:
    """Evidence recall of search and packed contexts on LoCoMo, by category; with a chat
    model, also F1 and BLEU-1 of its answers."""
    options = _options()
    try:
        samples = locomo.load(data)[:conversations]
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    chosen = {"llm_provider": llm_provider, "llm_base_url": llm_base_url, "llm_model": llm_model}
    given: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
    llm = make_llm(Settings.load(options.config, **given))
    try:
        result = locomo.evaluate(
            samples,
            lambda path: options.open(path, workers=1),
            cube_settings={} if tiers else {"working_capacity": 10_000},
            llm=llm,
        )
    finally:
        if llm is not None:
            llm.close()
    if out:
        Path(out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    _emit(result, locomo.table(result))


cli.add_command(mcp_command)
cli.add_command(export_command)
cli.add_command(import_command)
cli.add_command(serve)


def main(args: Sequence[str] | None = None) -> None:
    """The console script: run the CLI on ``args`` (default ``sys.argv[1:]``); always exits."""
    cli.main(args)
