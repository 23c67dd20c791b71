"""``memstrata worker``: background tasks only (consolidation, promotion, read counts), no HTTP.

Servers can then run with ``workers = 0`` while any number of worker processes, on any machines
that reach the same database and task queue (``redis_url``), do that work.  The memory is opened
with the same settings as ``serve``, with ``--threads`` worker threads.

Stopping: SIGTERM and SIGINT stop it as they stop ``serve`` (``until_stopped``): no new task is
claimed, running tasks get ``TASKS_GRACE_S`` seconds to finish and are released after that (they
run again elsewhere, from the start), the database is closed and the exit status is 0.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import urlsplit, urlunsplit

import click

from memstrata.cli.app import options
from memstrata.cli.serve import _log_to_stderr, until_stopped
from memstrata.memory.system import MemoryOS


@click.command()
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="Worker threads  [default: the workers setting, or 1 when it is 0]",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="Database  [default: the global --db, else the settings' db]",
)
def worker(threads: int | None, db: str | None) -> None:
    """Run background tasks (no HTTP) until interrupted."""
    settings = options().settings(db)
    threads = threads or settings.workers or 1
    queue = without_password(settings.redis_url) if settings.redis_url else "in the database"
    _log_to_stderr()
    click.echo(
        f"memstrata worker: db {without_password(settings.db)}, queue {queue}, {threads} thread(s)",
        err=True,
    )
    with until_stopped(), MemoryOS.open(settings=settings, workers=threads):
        threading.Event().wait()  # the worker threads run the tasks; a stop signal ends this


def without_password(address: str) -> str:
    """``address`` (a path, URL or ``key=value`` DSN) with any password shown as ``***``."""
    if "://" not in address:
        return re.sub(r"(password\s*=\s*)\S+", r"\1***", address)
    parts = urlsplit(address)
    if parts.password is None:
        return address
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
