"""``memstrata serve``: the REST API (``memstrata.server.rest``) on uvicorn.

One ``MemoryOS`` serves every request, with its background workers on (``Settings.workers``).
On an empty database the first admin is created; its API key is printed once, on stdout, unless
it came from ``Settings.admin_key`` (``MEMSTRATA_ADMIN_KEY``).
"""

from __future__ import annotations

import logging

import click

from memstrata.cli.app import options
from memstrata.memory.system import MemoryOS

DEFAULT_PORT = 8765


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535), help="Port."
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="SQLite database file  [default: the global --db, else the settings' db]",
)
def serve(host: str, port: int, db: str | None) -> None:
    """Serve the REST API (OpenAPI at /docs) until interrupted.

    Every request needs 'Authorization: Bearer KEY'; on a new database the first admin's key is
    printed here, once.
    """
    # Imported here, not at the top: the web stack is slow to import and no other command uses it.
    import uvicorn

    from memstrata.server.rest import bootstrap, create_app

    settings = options().settings(db)
    _log_to_stderr()
    with MemoryOS.open(settings=settings) as memory:
        key = bootstrap(memory)
        if key is not None:
            click.echo(f"Created user 'admin'. Its API key, shown only this once: {key}")
        uvicorn.run(create_app(memory), host=host, port=port, log_level="info")


def _log_to_stderr() -> None:
    """Show memstrata's own log (a 500's traceback and id, warnings) beside uvicorn's."""
    logger = logging.getLogger("memstrata")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
