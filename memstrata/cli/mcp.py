"""``memstrata mcp``: serve the memory to MCP clients (see ``memstrata.server.mcp``).

The server (and the ``mcp`` SDK) is imported only when the command runs, so other commands do
not pay for it.  Over stdio nothing but the protocol is written to stdout; messages go to stderr.
SIGTERM and SIGINT stop it as they stop ``memstrata serve`` (``serve.until_stopped``): the
database is closed cleanly and the exit status is 0.
"""

from __future__ import annotations

import click

from memstrata.cli.app import options
from memstrata.cli.serve import until_stopped
from memstrata.config import Settings

#: The HTTP port when --port is not given (8000 is the REST server's, 8080 the local LLM's).
DEFAULT_PORT = 8765


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one local client starts the server; http: streamable HTTP at /mcp, with API keys.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="HTTP port to listen on.",
)
@click.option(
    "--user",
    "user_id",
    metavar="USER",
    help="stdio: the acting user, created if absent  [default: the mcp_user setting] "
    "(over HTTP the API key names the user).",
)
@click.option(
    "--cube",
    "cube_id",
    metavar="CUBE",
    help="stdio: the user's cube, created if absent  [default: the mcp_cube setting, else the "
    "oldest cube USER owns, else a new one named USER]",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    help="Database file  [default: the global --db, else $MEMSTRATA_DB, else the data dir]",
)
def mcp(
    transport: str,
    host: str,
    port: int,
    user_id: str | None,
    cube_id: str | None,
    db_path: str | None,
) -> None:
    """Serve memory to MCP clients (Claude Desktop, Cursor…) over stdio or streamable HTTP."""
    # Imported here, not at the top: the MCP SDK is slow to import and no other command uses it.
    from memstrata.server import mcp as server

    if transport == "http" and (user_id or cube_id):
        raise click.UsageError("--user and --cube apply to stdio; over HTTP the API key decides")
    if transport == "stdio":
        settings = Settings.load(options().config)
        user_id = user_id or settings.mcp_user
        cube_id = cube_id or settings.mcp_cube
        if not user_id:
            raise click.UsageError("--transport stdio needs --user (or the mcp_user setting)")
    # workers=None: the configured background workers (a server consolidates as it goes).
    # SIGTERM stops it as Ctrl-C does, and either closes the database cleanly (exit status 0).
    with until_stopped(), options().open(db_path, workers=None) as memory:
        if user_id is not None:
            click.echo(f"memstrata MCP server on stdio for user {user_id}", err=True)
            server.serve_stdio(memory, user_id, cube_id)
        else:
            configured = memory.settings.admin_key
            key = memory.bootstrap_admin(configured)
            if key is not None:  # an empty database: without a user no key could work
                shown = "the configured admin_key" if configured else f"{key} (shown once)"
                click.echo(f"created user 'admin'; its API key: {shown}", err=True)
            click.echo(f"memstrata MCP server at http://{host}:{port}/mcp", err=True)
            server.serve_http(memory, host, port)
