"""``Client`` and ``AsyncClient``: ``MemoryOS``'s calls over the REST API (see the package
docstring), one over ``httpx.Client``, the other over ``httpx.AsyncClient``.

Like ``MemoryOS``, ``Client`` names its calls and each is written once, as an exchange
(``client.transport``) in the part that owns its concern, run on the client's transport
(``client.calls.Call``).  ``AsyncClient`` is derived from ``Client``'s table: each ``Call`` is
an ``AsyncCall`` of the same exchange, so the two have the same methods, the same requests and
the same errors:

=====================  ========================================================================
``client.principals``  users, API keys, cubes, grants
``client.items``       add, add_document, list, get, update, delete, history, transition,
                       rollback, erase, audit, end_task, get_image
``client.reading``     search, context, chat, chat_stream, get_profile, get_preferences
``client.service``     tasks, retry_task, wait, configure, metrics, health, MemCube export and
                       import, artifacts, build_activation, queue_adapter
=====================  ========================================================================
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from memstrata.client.calls import AsyncCall, Call
from memstrata.client.items import Items
from memstrata.client.principals import Principals
from memstrata.client.reading import Reading
from memstrata.client.sending import AsyncTransport, Transport
from memstrata.client.service import Service
from memstrata.client.transport import BaseTransport
from memstrata.closing import AsyncClosing

__all__ = ["AsyncClient", "Client"]


class _Parts:
    """What both clients hold: their transport, and the parts whose exchanges it runs."""

    def __init__(self, transport: BaseTransport[Any]) -> None:
        self._principals = Principals()
        self._items = Items()
        self._reading = Reading()
        self._service = Service()
        self._timeout = transport.timeout

    @property
    def timeout(self) -> float:
        """Seconds each request may take (``wait`` adds what it asks the server to wait)."""
        return self._timeout


class Client(_Parts):
    """The REST API at ``base_url`` as the user of ``api_key`` (see the package docstring).

    ``timeout`` is in seconds, per request (``wait`` adds the time it asks the server to wait;
    a chat with a slow model may need more).  Close it (or use ``with``) to release its
    connections.
    """

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 30.0) -> None:
        self._transport = Transport(base_url, api_key, timeout)
        super().__init__(self._transport)

    def close(self) -> None:
        """Release the connections."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- users, keys, cubes and grants (client.principals) ---------------------------------------
    create_user = Call("_principals", Principals.create_user)
    list_users = Call("_principals", Principals.list_users)
    me = Call("_principals", Principals.me)
    create_key = Call("_principals", Principals.create_key)
    list_keys = Call("_principals", Principals.list_keys)
    revoke_key = Call("_principals", Principals.revoke_key)
    create_cube = Call("_principals", Principals.create_cube)
    list_cubes = Call("_principals", Principals.list_cubes)
    get_cube = Call("_principals", Principals.get_cube)
    delete_cube = Call("_principals", Principals.delete_cube)
    grant = Call("_principals", Principals.grant)
    share = Call("_principals", Principals.share)
    revoke = Call("_principals", Principals.revoke)
    grants = Call("_principals", Principals.grants)

    # -- items and their lifecycle (client.items) ------------------------------------------------
    add = Call("_items", Items.add)
    add_document = Call("_items", Items.add_document)
    list_memories = Call("_items", Items.list_memories)
    get = Call("_items", Items.get)
    update = Call("_items", Items.update)
    delete = Call("_items", Items.delete)
    history = Call("_items", Items.history)
    feedback = Call("_items", Items.feedback)
    expire = Call("_items", Items.expire)
    transition = Call("_items", Items.transition)
    rollback = Call("_items", Items.rollback)
    erase = Call("_items", Items.erase)
    audit = Call("_items", Items.audit)
    end_task = Call("_items", Items.end_task)
    get_image = Call("_items", Items.get_image)

    # -- reading memory (client.reading) ---------------------------------------------------------
    search = Call("_reading", Reading.search)
    context = Call("_reading", Reading.context)
    chat = Call("_reading", Reading.chat)
    chat_stream = Call("_reading", Reading.chat_stream)
    get_profile = Call("_reading", Reading.get_profile)
    get_preferences = Call("_reading", Reading.get_preferences)

    # -- running the service (client.service) ----------------------------------------------------
    tasks = Call("_service", Service.tasks)
    retry_task = Call("_service", Service.retry_task)
    wait = Call("_service", Service.wait)
    configure = Call("_service", Service.configure)
    metrics = Call("_service", Service.metrics)
    health = Call("_service", Service.health)
    export = Call("_service", Service.export)
    import_cube = Call("_service", Service.import_cube)
    artifacts = Call("_service", Service.artifacts)
    build_activation = Call("_service", Service.build_activation)
    queue_adapter = Call("_service", Service.queue_adapter)


class AsyncClient(_Parts, AsyncClosing):
    """``Client`` for ``async`` code, on ``httpx.AsyncClient``: the same methods, each a
    coroutine (``await client.search(...)``).

    ``chat_stream`` returns, once awaited, an async iterator of the pieces
    (``async for piece in await client.chat_stream(...)``; ``aclose`` it to stop early).  Use it
    from one event loop; ``aclose`` it (or use ``async with``) to release its connections.
    """

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 30.0) -> None:
        self._transport = AsyncTransport(base_url, api_key, timeout)
        super().__init__(self._transport)

    async def aclose(self) -> None:
        """Release the connections."""
        await self._transport.aclose()

    if TYPE_CHECKING:  # the calls are set below, from Client's table; a checker sees Any

        def __getattr__(self, name: str) -> Any: ...


for _name, _call in list(vars(Client).items()):
    if isinstance(_call, Call):
        _async = AsyncCall(_call.part, _call.function)
        _async.__set_name__(AsyncClient, _name)
        setattr(AsyncClient, _name, _async)
