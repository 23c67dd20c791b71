"""A Python client for the REST API (docs/rest.md): ``MemoryOS``'s calls, over HTTP.

::

    from memstrata.client import Client

    with Client("http://127.0.0.1:8765", api_key) as memory:
        memory.add([{"role": "user", "content": "I moved to Porto."}], cube_id="notes")
        for hit in memory.search("Where do I live?"):
            print(hit.score, hit.item.text)

Methods have ``MemoryOS``'s names and keyword arguments, less the acting user: the API key says
who calls, so ``user_id=`` appears only where the SDK acts on another user (keys, sharing), and
``me`` there means the caller.  The lifecycle and governance calls are here too (``transition``,
``rollback``, ``as_of`` on ``get`` and ``search``, ``audit``, ``erase``, ``revoke``, ``grants``),
and MemCube ``export``/``import_cube`` to and from a local ``.tar.gz``.  A time (``When``) is a
datetime, an ISO 8601 string or epoch seconds; a naive one is UTC.

Results are the core's dataclasses (``User``, ``Cube``, ``MemoryItem``, ``Version``, ``Hit``,
``Context``, ``ChatReply``, ``Task``, ``Event``…), read back by ``memstrata.wire`` exactly as the
server had them: every field travels, a search hit's item included, and an answer that lacks one
is a ``ResponseError`` (``bad_response``), never a default.  ``MemoryOS.stats`` has no JSON
endpoint: ``metrics`` returns the Prometheus text, which holds the same counts.

Errors, the ``memstrata.errors`` tree plus two leaves for what only a client meets::

    MemstrataError
    ├── ValidationError, Unauthenticated, NotFoundError, PermissionDenied, ConflictError, …
    │                          an error response, by its ``code``: the class raised in process
    ├── ResponseError          an error response with a code no class has (405, 413, 415, a 500
    │                          bug, a proxy's page); ``status`` and ``code`` as received
    └── ServerUnreachable (503) no answer: connection refused or broken, or the timeout passed

Each carries the server's ``message`` and ``hint``.  The fields a subclass sets in process
(``PermissionDenied.user_id``…) are not in a response and are not set.  Bad arguments found
before sending (a filter the API cannot list by, a value JSON cannot carry) are a
``ValidationError`` too.

Thread safety: one ``Client`` may be shared by threads; each call is one request on the pool of
its ``httpx.Client``, which is thread-safe (``wait`` without a timeout may make several).

``AsyncClient`` has the same methods as coroutines, on ``httpx.AsyncClient`` (one event loop);
both send the same requests and raise the same errors (each call is written once, as an exchange
that either transport runs: ``client.transport``)::

    async with AsyncClient("http://127.0.0.1:8765", api_key) as memory:
        hits = await memory.search("Where do I live?")
        async for piece in await memory.chat_stream("Where do I live?", cube_id="notes"):
            print(piece, end="")
"""

from memstrata.client.errors import ResponseError, ServerUnreachable
from memstrata.client.http import AsyncClient, Client
from memstrata.client.service import Health
from memstrata.client.transport import When

__all__ = ["AsyncClient", "Client", "Health", "ResponseError", "ServerUnreachable", "When"]
