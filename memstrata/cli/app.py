"""The root ``memstrata`` group and what every command shares: the global options, opening the
database, printing (text or ``--json``), the shared ``--user`` / ``--reason`` options, and the
one place a failure becomes an ``error: …`` line.

Commands live in the modules named after what they act on (``users``, ``cubes``, ``memories``,
``memcube``, ``evals``, ``demo``, ``serve``, ``mcp``); ``memstrata.cli`` adds them to ``cli``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

import click
from click.exceptions import NoArgsIsHelpError

from memstrata.cli import render
from memstrata.config import Settings
from memstrata.embed import EMBEDDERS
from memstrata.errors import MemstrataError
from memstrata.memory.system import MemoryOS

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Options:
    """The global options; ``db=None`` means whatever ``Settings`` picks."""

    db: str | None = None
    config: str | None = None
    embedder: str | None = None
    as_json: bool = False

    def settings(self, db: str | None = None, **overrides: Any) -> Settings:
        """The settings: the ``--config`` file, the environment, then these options."""
        return Settings.load(self.config, db=db or self.db, embedder=self.embedder, **overrides)

    def open(self, db: str | None = None, **overrides: Any) -> MemoryOS:
        """A ``MemoryOS`` on ``db`` (default: the ``--db`` option, else ``Settings``' db).

        Background tasks run inline unless ``overrides`` say otherwise: a command is a short
        process, and its consolidation should be done when it exits.
        """
        return MemoryOS.open(settings=self.settings(db, **{"workers": 0, **overrides}))


class Group(click.Group):
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
            fail(str(exc), 1)
        except NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help())
            code = 0
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            fail(exc.format_message() + hint, exc.exit_code)
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except click.exceptions.Abort:
            fail("aborted", 1)
        sys.exit(code if isinstance(code, int) else 0)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit with ``code``."""
    click.echo("error: " + " ".join(message.splitlines()), err=True)
    sys.exit(code)


def options() -> Options:
    """The global options of the command running now."""
    return click.get_current_context().find_object(Options) or Options()


def emit(value: object, lines: Iterable[str]) -> None:
    """Print ``value`` as JSON under ``--json``, else the human-readable ``lines``."""
    if options().as_json:
        click.echo(render.to_json(value))
    else:
        for line in lines:
            click.echo(line)


def with_memory(command: Callable[Concatenate[MemoryOS, P], R]) -> Callable[P, R]:
    """Call ``command`` with an open ``MemoryOS`` first; it is closed when the command ends."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        ctx = click.get_current_context()
        return command(ctx.with_resource(options().open()), *args, **kwargs)

    return wrapper


#: ``--user USER``: the acting user, whose grants the core checks.
user_option = click.option(
    "--user", "user_id", required=True, metavar="USER", help="Acting user; its grants are checked."
)
#: ``--reason TEXT``: kept in the item's history.
reason_option = click.option("--reason", help="Why; kept in the history.")


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="SQLite database file or postgresql:// address  [default: $MEMSTRATA_DB, else memstrata.db in the user data dir]",
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
    ctx.obj = Options(db, config, embedder, as_json)
