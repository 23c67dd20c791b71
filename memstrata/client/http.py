"""``Client``: ``MemoryOS``'s calls over the REST API (see the package docstring).

Like ``MemoryOS``, the class names its calls and each is written once, in the part that owns its
concern (``memory.delegate.Delegate``), all parts sharing one ``Transport``:

=====================  ========================================================================
``client.principals``  users, API keys, cubes, grants
``client.items``       add, add_document, list, get, update, delete, history, transition,
                       rollback, erase, audit
``client.reading``     search, context, chat, chat_stream, get_profile, get_preferences
``client.service``     tasks, retry_task, wait, configure, metrics, health, MemCube export and
                       import, artifacts, build_activation, queue_adapter
=====================  ========================================================================
"""

from __future__ import annotations

from types import TracebackType

from memstrata.client.items import Items
from memstrata.client.principals import Principals
from memstrata.client.reading import Reading
from memstrata.client.service import Service
from memstrata.client.transport import Transport
from memstrata.memory.delegate import Delegate


class Client:
    """The REST API at ``base_url`` as the user of ``api_key`` (see the package docstring).

    ``timeout`` is in seconds, per request (``wait`` adds the time it asks the server to wait;
    a chat with a slow model may need more).  Close it (or use ``with``) to release its
    connections.
    """

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 30.0) -> None:
        self._transport = Transport(base_url, api_key, timeout)
        self._principals = Principals(self._transport)
        self._items = Items(self._transport)
        self._reading = Reading(self._transport)
        self._service = Service(self._transport)

    @property
    def timeout(self) -> float:
        """Seconds each request may take (``wait`` adds what it asks the server to wait)."""
        return self._transport.timeout

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
    create_user = Delegate("_principals", Principals.create_user)
    list_users = Delegate("_principals", Principals.list_users)
    me = Delegate("_principals", Principals.me)
    create_key = Delegate("_principals", Principals.create_key)
    list_keys = Delegate("_principals", Principals.list_keys)
    revoke_key = Delegate("_principals", Principals.revoke_key)
    create_cube = Delegate("_principals", Principals.create_cube)
    list_cubes = Delegate("_principals", Principals.list_cubes)
    get_cube = Delegate("_principals", Principals.get_cube)
    delete_cube = Delegate("_principals", Principals.delete_cube)
    grant = Delegate("_principals", Principals.grant)
    share = Delegate("_principals", Principals.share)
    revoke = Delegate("_principals", Principals.revoke)
    grants = Delegate("_principals", Principals.grants)

    # -- items and their lifecycle (client.items) ------------------------------------------------
    add = Delegate("_items", Items.add)
    add_document = Delegate("_items", Items.add_document)
    list_memories = Delegate("_items", Items.list_memories)
    get = Delegate("_items", Items.get)
    update = Delegate("_items", Items.update)
    delete = Delegate("_items", Items.delete)
    history = Delegate("_items", Items.history)
    feedback = Delegate("_items", Items.feedback)
    expire = Delegate("_items", Items.expire)
    transition = Delegate("_items", Items.transition)
    rollback = Delegate("_items", Items.rollback)
    erase = Delegate("_items", Items.erase)
    audit = Delegate("_items", Items.audit)

    # -- reading memory (client.reading) ---------------------------------------------------------
    search = Delegate("_reading", Reading.search)
    context = Delegate("_reading", Reading.context)
    chat = Delegate("_reading", Reading.chat)
    chat_stream = Delegate("_reading", Reading.chat_stream)
    get_profile = Delegate("_reading", Reading.get_profile)
    get_preferences = Delegate("_reading", Reading.get_preferences)

    # -- running the service (client.service) ----------------------------------------------------
    tasks = Delegate("_service", Service.tasks)
    retry_task = Delegate("_service", Service.retry_task)
    wait = Delegate("_service", Service.wait)
    configure = Delegate("_service", Service.configure)
    metrics = Delegate("_service", Service.metrics)
    health = Delegate("_service", Service.health)
    export = Delegate("_service", Service.export)
    import_cube = Delegate("_service", Service.import_cube)
    artifacts = Delegate("_service", Service.artifacts)
    build_activation = Delegate("_service", Service.build_activation)
    queue_adapter = Delegate("_service", Service.queue_adapter)
