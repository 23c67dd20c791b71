"""The MCP server itself: the tools and resources registered with the SDK, and its transports."""

from __future__ import annotations

import inspect
import threading
from typing import Any

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AnyHttpUrl, ValidationError

from memstrata.memory.system import MemoryOS
from memstrata.server.mcp.caller import Caller, KeyVerifier, fixed_caller
from memstrata.server.mcp.reporting import invalid_arguments
from memstrata.server.mcp.resources import RESOURCES, Resources
from memstrata.server.mcp.tools import Tools
from memstrata.version import version

INSTRUCTIONS = (
    "Long-term memory for this user. Call add_memory after each exchange worth keeping; call "
    "retrieve_memory before answering a question that may depend on the past; the 'context' "
    "field of its result is ready to put in a prompt."
)


class _Server(MCPServer):
    """The SDK's server, with a call's rejected arguments reported on one line (``reporting``)
    instead of pydantic's multi-line text with its documentation URLs."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {invalid_arguments(cause)}") from cause


def build_server(memory: MemoryOS, caller: Caller, *, auth_url: str | None = None) -> MCPServer:
    """An ``MCPServer`` with every tool and resource bound to ``memory`` and ``caller``.

    With ``auth_url`` (the server's own base URL, HTTP only) every request must carry a live
    API key; ``caller`` must then be an unfixed ``Caller(memory)``.
    """
    auth = None
    if auth_url is not None:  # the SDK's bearer check, without OAuth: no issuer is advertised
        auth = AuthSettings(issuer_url=AnyHttpUrl(auth_url), resource_server_url=None)
    server: MCPServer = _Server(
        "memstrata",
        instructions=INSTRUCTIONS,
        version=version(),
        auth=auth,
        token_verifier=None if auth is None else KeyVerifier(memory),
    )
    _add_tools(server, Tools(memory, caller))
    _add_resources(server, Resources(memory, caller))
    return server


def _add_tools(server: MCPServer, tools: Tools) -> None:
    for name in Tools.TOOLS:
        method = getattr(tools, name)
        hints = ToolAnnotations(
            read_only_hint=name in Tools.READ_ONLY, destructive_hint=name in Tools.DESTRUCTIVE
        )
        server.add_tool(method, name=name, description=inspect.getdoc(method), annotations=hints)


def _add_resources(server: MCPServer, resources: Resources) -> None:
    for uri, name in RESOURCES:
        reader = getattr(resources, name)
        register = server.resource(
            uri, name=name, description=inspect.getdoc(reader), mime_type="application/json"
        )
        register(reader)


def serve_stdio(memory: MemoryOS, user_id: str, cube_id: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes them (see ``fixed_caller``).

    The server's event loop runs in a thread of its own while this one waits for it, so that a
    stop signal (``cli.serve.until_stopped`` raises ``KeyboardInterrupt`` where the main thread
    is) interrupts the wait, never a task of the loop halfway (which asyncio reports, at
    shutdown, with a traceback).  What the server raises is raised here.
    """
    server = build_server(memory, fixed_caller(memory, user_id, cube_id))
    failed: list[BaseException] = []

    def run() -> None:
        try:
            server.run("stdio")
        except BaseException as exc:  # handed to the waiting thread, which raises it
            failed.append(exc)

    thread = threading.Thread(target=run, name="memstrata-mcp-stdio", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def serve_http(memory: MemoryOS, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted; keys required."""
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    server = build_server(memory, Caller(memory), auth_url=base)
    server.run(
        "streamable-http",
        host=host,
        port=port,
        max_request_body_size=memory.settings.max_request_bytes,
    )
