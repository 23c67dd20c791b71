"""The ``memstrata`` command line: a thin adapter over ``MemoryOS`` (parse → core → render).

Every command opens the database named by the global options (``--db``, ``--config``,
``--embedder``), calls one ``MemoryOS`` method and prints the result: short aligned lines by
default, JSON with ``--json`` (``memstrata.wire``'s shapes).  Failures never print a traceback: a
``MemstrataError`` is one ``error: …`` line on stderr and exit status 1, a usage error one such
line and status 2.

The root group and what commands share are in ``app``; the commands in ``users``, ``cubes``,
``memories``, ``tasks``, ``memcube``, ``evals``, ``demo``, ``serve``, ``worker``, ``migrate``,
``vacuum``, ``truth`` (feedback, expire) and ``mcp``; text rendering in ``render``; the progress bar of long commands in ``progress``.  ``cli``
is the group, ``main`` the console script.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.cli import memories
from memstrata.cli.app import cli
from memstrata.cli.bench import bench_group
from memstrata.cli.cubes import adapt_command, cubes
from memstrata.cli.demo import demo
from memstrata.cli.evals import eval_group
from memstrata.cli.mcp import mcp
from memstrata.cli.memcube import export_command, import_command
from memstrata.cli.migrate import migrate_command
from memstrata.cli.serve import serve
from memstrata.cli.tasks import tasks
from memstrata.cli.truth import expire_command, feedback_command
from memstrata.cli.users import users
from memstrata.cli.vacuum import vacuum_command
from memstrata.cli.worker import worker

__all__ = ["cli", "main"]

for _command in (users, cubes, adapt_command, *memories.COMMANDS, tasks, demo, eval_group,
                 bench_group, mcp, export_command, import_command, migrate_command, serve,
                 worker, vacuum_command, feedback_command, expire_command):  # fmt: skip
    cli.add_command(_command)


def main(args: Sequence[str] | None = None) -> None:
    """The console script: run the CLI on ``args`` (default ``sys.argv[1:]``); always exits."""
    cli.main(args)
