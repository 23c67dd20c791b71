"""``AsyncBackend``: ``mapping.Backend``'s async form, for adapters whose framework calls memory
only from ``async`` code (AutoGen, Google ADK, Pydantic AI).

It takes the same four memories as ``Backend`` and keeps its rules (``mapping``'s module docs):
the acting user (with a client, the API key's owner; another ``user_id`` is a
``ValidationError``), the memory cube (``cube_id=`` or the user's default cube, resolved by the
same ``mapping.attach_steps``), the errors as the memory raises them.  What differs is how a
call runs, chosen once here so that no adapter has a branch per kind:

* an ``AsyncMemoryOS`` or ``AsyncClient`` is awaited on the caller's event loop: no thread
  waits on it (``Backend.offload`` holds a worker thread for the whole of the adapter's logic;
  an app's default executor, the one ``asyncio.to_thread`` shares with the loop's own name
  lookups, is never held by memory calls here);
* a ``MemoryOS`` runs in the bounded thread pool of an ``AsyncMemoryOS`` made over it (owned:
  ``aclose`` closes that pool, never the ``MemoryOS``);
* a sync ``Client`` runs in a worker thread (``asyncio.to_thread``): it has no other form.  It
  is never used when an ``AsyncClient`` was given.

The user and the cube are resolved on the first call (so a bad id or a cube the user may not
read fails there, as with ``Backend`` over an async memory), once per backend.  Cancelling an
awaiting call cancels an ``AsyncClient``'s request; a core call already running in the pool
ends whole (each write is one transaction: there or not at all).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from memstrata.errors import ConflictError, NotFoundError
from memstrata.integrations import mapping
from memstrata.memory.aio import AsyncMemoryOS
from memstrata.memory.system import MemoryOS
from memstrata.model import Cube

__all__ = ["USERS_KEPT", "AsyncBackend", "UserBackends"]

#: Users whose backend (their resolved user and cube) a ``UserBackends`` keeps: one used less
#: recently is dropped and resolved again when it comes back (a call or two more), so that
#: many users cannot grow a process's memory.
USERS_KEPT = 256


class AsyncBackend:
    """One user's view of the memory an async adapter was given, and that user's memory cube.

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient`` (anything
    else is a ``TypeError``); ``user_id`` the acting user (required with the core, where it is
    created if missing; optional with a client, whose user is the API key's owner); ``cube_id``
    the memory cube.  The calls are ``Backend``'s (``mapping.CALLS``: ``MemoryOS``'s, less
    ``user_id=``) as coroutines of the same signatures, made from that one table when this
    module is imported.
    """

    def __init__(self, memory: mapping.Memory, *, user_id: str | None, cube_id: str | None) -> None:
        self._core = mapping.checked(memory, user_id)
        self.memory = memory
        self._pool = AsyncMemoryOS(memory) if isinstance(memory, MemoryOS) else None
        # What each call goes to, and whether its calls are coroutines (else: a sync Client).
        self._target: Any = self._pool or memory
        self._awaited = self._core or inspect.iscoroutinefunction(getattr(memory, "me", None))
        self._claimed = user_id
        self._user: str | None = user_id if self._core else None
        self._wanted_cube = cube_id
        self._cube: str | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    async def aclose(self) -> None:
        """Close the thread pool this backend made over a ``MemoryOS`` (never a memory given)."""
        if self._pool is not None:
            await self._pool.aclose()

    # -- who and where -----------------------------------------------------------------------

    async def user_id(self) -> str:
        """The acting user: ``user_id=``, or a client's API key owner (asked once)."""
        if self._user is None:
            async with self._resolving():
                if self._user is None:
                    me = await self._call("me")
                    self._user = mapping.owner(self._claimed, me.user_id)
        return self._user

    async def cube_id(self) -> str:
        """The memory cube's id (resolved once; see ``mapping``'s module docs)."""
        if self._cube is None:
            user = await self.user_id()  # resolved first: it takes the lock itself
            async with self._resolving():
                if self._cube is None:
                    self._cube = (await self._attach(user, self._wanted_cube)).cube_id
        return self._cube

    async def attach(
        self,
        cube_id: str | None = None,
        *,
        name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """``Backend.attach``: ``cube_id`` (created, owned by the user, when missing) or the
        user's default cube."""
        return await self._attach(await self.user_id(), cube_id, name=name, settings=settings)

    # -- the calls: ``mapping.CALLS``, each ``Backend``'s as a coroutine (set below) ----------

    if TYPE_CHECKING:  # the calls are set below, from Backend's table; a checker sees Any

        def __getattr__(self, name: str) -> Any: ...

    # -- running them ------------------------------------------------------------------------

    async def _attach(
        self,
        user: str,
        cube_id: str | None,
        *,
        name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """``mapping.attach_steps``, each step's call awaited."""
        steps = mapping.attach_steps(self._core, user, cube_id, name=name, settings=settings)
        try:
            call, args, kwargs = next(steps)
            while True:
                try:
                    answer = await self._call(call, *args, **kwargs)
                except (NotFoundError, ConflictError) as error:  # the steps may expect these
                    call, args, kwargs = steps.throw(error)
                else:
                    call, args, kwargs = steps.send(answer)
        except StopIteration as done:
            found: Cube = done.value
            return found

    async def _as_user(self, call: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``call`` as the acting user (a client's calls act as its key's owner)."""
        if self._core:
            kwargs["user_id"] = self._user
        else:
            await self.user_id()  # a claimed user_id that is not the key's owner fails first
        return await self._call(call, *args, **kwargs)

    async def _call(self, call: str, /, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self._target, call)
        if self._awaited:
            return await method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    def _resolving(self) -> asyncio.Lock:
        """A lock for the first calls on this loop: concurrent ones resolve user and cube once.
        (An ``asyncio.Lock`` belongs to one loop; a backend may be used from several in turn.)"""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock


def _awaited(name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The coroutine method ``name``: ``Backend.name``'s signature and docstring, its call
    sent as the acting user and awaited."""

    @functools.wraps(getattr(mapping.Backend, name))
    async def call(self: AsyncBackend, /, *args: Any, **kwargs: Any) -> Any:
        return await self._as_user(name, *args, **kwargs)

    call.__qualname__ = f"AsyncBackend.{name}"
    call.__module__ = __name__
    return call


for _name in mapping.CALLS:
    setattr(AsyncBackend, _name, _awaited(_name))


class UserBackends:
    """An ``AsyncBackend`` per user of one memory, for a framework that names the user in each
    call (ADK): ``backends(user_id)``.  ``memory`` is any of the four; with a ``MemoryOS`` one
    bounded pool is made for all users (``aclose`` closes it); with a client every user must be
    the API key's owner (another is a ``ValidationError`` at that user's first call).
    ``cube_id`` is each user's cube (default: each user's default cube)."""

    def __init__(self, memory: mapping.Memory, *, cube_id: str | None) -> None:
        mapping.checked(memory, "")  # the kind only: each user is checked by their backend
        self.memory = memory
        self._pool = AsyncMemoryOS(memory) if isinstance(memory, MemoryOS) else None
        self._shared: mapping.Memory = self._pool or memory
        self._cube_id = cube_id
        self._kept: OrderedDict[str, AsyncBackend] = OrderedDict()

    def __call__(self, user_id: str) -> AsyncBackend:
        """``user_id``'s backend (kept for the ``USERS_KEPT`` most recent users)."""
        backend = self._kept.pop(user_id, None)
        if backend is None:
            backend = AsyncBackend(self._shared, user_id=user_id, cube_id=self._cube_id)
        self._kept[user_id] = backend
        while len(self._kept) > USERS_KEPT:
            self._kept.popitem(last=False)
        return backend

    async def aclose(self) -> None:
        """Close the thread pool made over a ``MemoryOS`` (never a memory given)."""
        if self._pool is not None:
            await self._pool.aclose()
