"""The MCP server: MemoryOS's tools, and memstrata's, over the official ``mcp`` SDK (stdio or HTTP).

A thin adapter: every tool parses its arguments, calls ``MemoryOS`` and returns plain JSON in
``memstrata.wire``'s shapes.

Who calls, and which cube is theirs (``caller``):

- **stdio** (a local client such as Claude Desktop starts the server): one configured user and
  cube, created on first use if absent (``MemoryOS.attach``); ``fixed_caller``.
- **streamable HTTP**: the user of the ``Authorization: Bearer KEY`` header
  (``MemoryOS.authenticate``); a request without a valid key is answered 401 before any tool
  runs.  Their cube is their *default cube* (``MemoryOS.default_cube``): the oldest cube they
  own, or a new one named after them when they own none.  A tool that takes ``cube_id`` acts on
  that cube instead, if the caller's grants allow.

What an agent may do is what its user may (the core checks the grants), and ``erase_memory``
asks the core for ``own_data_only`` erasure: an agent reads what others wrote and must not be
talked into wiping their data.  Each tool carries MCP's ``readOnlyHint`` / ``destructiveHint`` so
that a client can ask its user before acting.

Errors: a ``MemstrataError`` becomes an MCP tool error (``isError``) whose text is the error's
one-line message (a resource read answers a JSON-RPC error with it); never a traceback.  Tools are
synchronous and the SDK runs each call on a worker thread, so the event loop never waits on an
embedding or the database (``MemoryOS`` is thread-safe).

Modules: ``caller`` (who calls), ``args`` (argument types, bounds from ``memstrata.limits``),
``tools`` and ``resources`` (what is served), ``reporting`` (errors as one line), ``app`` (the
server and its transports).
"""

from memstrata.server.mcp.app import INSTRUCTIONS, build_server, serve_http, serve_stdio
from memstrata.server.mcp.args import Included, Target
from memstrata.server.mcp.caller import Caller, KeyVerifier, fixed_caller
from memstrata.server.mcp.resources import RESOURCES, Resources
from memstrata.server.mcp.tools import ASSISTANT, Tools

__all__ = [
    "ASSISTANT",
    "INSTRUCTIONS",
    "RESOURCES",
    "Caller",
    "Included",
    "KeyVerifier",
    "Resources",
    "Target",
    "Tools",
    "build_server",
    "fixed_caller",
    "serve_http",
    "serve_stdio",
]
