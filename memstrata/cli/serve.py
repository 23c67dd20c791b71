"""``memstrata serve``: the REST API (``memstrata.server.rest``) on uvicorn.

One ``MemoryOS`` serves every request, with its background workers on (``Settings.workers``).
On an empty database the first admin is created; its API key is printed once, on stdout, unless
it came from ``Settings.admin_key`` (``MEMSTRATA_ADMIN_KEY``).

Stopping: SIGTERM (a service manager, ``docker stop``, ``kill``) and SIGINT (Ctrl-C) both stop the
server gracefully (``until_stopped``): no new connection is accepted, requests in flight get
``SHUTDOWN_GRACE_S`` seconds (then they are cancelled), ``MemoryOS.close`` flushes the buffered
read counts, lets running background tasks finish or releases them, and closes the database;
the exit status is 0.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

import click

from memstrata.cli.app import options
from memstrata.memory.system import MemoryOS

DEFAULT_PORT = 8765
#: glibc malloc arenas the server may use (``M_ARENA_MAX``), unless ``MALLOC_ARENA_MAX`` says.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
#: Seconds the requests in flight get to finish after a stop signal before they are cancelled.
SHUTDOWN_GRACE_S = 5

log = logging.getLogger("memstrata")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535), help="Port."
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="SQLite database file or postgresql:// address  [default: the global --db, else the settings' db]",
)
@click.option(
    "--workers",
    type=click.IntRange(0, 64),
    help="Background worker threads  [default: the settings' workers]; 0: none, the tasks are "
    "left to `memstrata worker` processes.",
)
def serve(host: str, port: int, db: str | None, workers: int | None) -> None:
    """Serve the REST API (OpenAPI at /docs) until interrupted.

    Every request needs 'Authorization: Bearer KEY'; on a new database the first admin's key is
    printed here, once.
    """
    # Imported here, not at the top: the web stack is slow to import and no other command uses it.
    import uvicorn

    from memstrata.server.rest import bootstrap, create_app

    bound_malloc_arenas()

    chosen = {} if workers is None else {"workers": workers, "queue_only": workers == 0}
    settings = options().settings(db, **chosen)
    _log_to_stderr()
    with until_stopped(), MemoryOS.open(settings=settings) as memory:
        key = bootstrap(memory)
        if key is not None:
            click.echo(f"Created user 'admin'. Its API key, shown only this once: {key}")
        app = create_app(memory)
        uvicorn.run(
            app, host=host, port=port, log_level="info", timeout_graceful_shutdown=SHUTDOWN_GRACE_S
        )


def bound_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Let glibc's malloc use at most ``arenas`` arenas in this process; whether it was set.

    Under glibc each thread that allocates while another holds an arena gets an arena of its own,
    up to 8 per core, and memory freed in an arena stays there for its threads.  The server's
    request threads (up to 40, retired when idle and started again) spread SQLite's and Python's
    allocations over 16 arenas on 2 cores: in a soak (``bench/soak.py``, 25 clients) the free
    space held in them grew from 6 to 55 MiB in two minutes and kept growing, a third of the
    server's RSS growth; with 2 arenas it stayed under 10 MiB.  Nothing is done when the user set
    ``MALLOC_ARENA_MAX`` (glibc read it already) or the C library has no ``mallopt`` (not glibc).
    Call it before the threads start.
    """
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))


class _Stop:
    """What ``until_stopped`` saw: ``requested`` once SIGTERM or SIGINT ended the block."""

    def __init__(self) -> None:
        self.requested = False

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The handler of both signals: ``KeyboardInterrupt`` the first time, nothing after
        (what the block opened is being closed, and is let finish: that takes seconds)."""
        if self.requested:
            log.info("already stopping; closing the database")
            return
        self.requested = True
        raise KeyboardInterrupt


#: The signals that stop a server: a service manager's (``docker stop``, systemd) and Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def until_stopped() -> Iterator[None]:
    """Run a server in this block until SIGTERM or SIGINT; then close what it opened and exit 0.

    Both signals raise ``KeyboardInterrupt`` at once in the main thread (uvicorn first shuts down
    gracefully on either, then re-raises it; the asyncio runner's own Ctrl-C handling, which
    waits for every task, is not used), so everything opened inside the block is closed on the
    way out; a second signal is ignored while that runs.  Then the process exits with status 0
    at once (``exit_now``): a thread left behind (a request past the grace period, still
    embedding; the MCP SDK's stdin reader) must not hold the exit.  A block that ends any other
    way returns normally, with the previous handlers restored.  Outside the main thread (where no
    signal handler can be set) it only catches the interrupt and returns.
    """
    stop = _Stop()
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, stop.on_signal) for sig in STOP_SIGNALS} if main else {}
    try:
        yield
    except KeyboardInterrupt:
        stop.requested = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.requested and main:
        exit_now()


def exit_now() -> NoReturn:
    """Flush the logs and the standard streams and end the process with status 0, without
    waiting for other threads (the database must be closed already)."""
    log.info("stopped")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _log_to_stderr() -> None:
    """Show memstrata's own log (a 500's traceback and id, warnings) beside uvicorn's."""
    logger = logging.getLogger("memstrata")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
