"""How a framework's users, sessions, threads and namespaces become memstrata's users and cubes,
and what an adapter calls to read and write them (``Backend``).

Every adapter of ``memstrata.integrations`` maps through this module, so the rule is one:

* **The memory an adapter is given** is a ``MemoryOS``, an ``AsyncMemoryOS``, a ``Client`` or
  an ``AsyncClient``; the adapter wraps it in a ``Backend`` and calls only that, so no adapter
  has a branch per kind.  Each adapter's logic is written once, as sync code: its sync methods
  run it directly, its async methods in a worker thread (``Backend.offload``) whose calls go to
  an ``AsyncMemoryOS`` or ``AsyncClient`` on the caller's event loop when one was given (never a
  sync client in a thread when an async one was passed).  An adapter whose framework calls
  memory only from async code uses ``aio.AsyncBackend`` instead: these rules, each call
  awaited (no worker thread waits on an async memory).
* **The acting user is fixed when the adapter is made** (``user_id=``): every call it makes
  carries that id, so the core's grant checks are those of every other surface.  With a
  ``Client`` the acting user is the API key's owner: ``user_id=`` may be omitted, and one that
  names anyone else is a ``ValidationError``.  An adapter never reads a cube its user may not
  read.
* **The memory cube** (``Backend.cube_id``) is the cube named by ``cube_id=`` (created, owned by
  the user, when missing; one the user may not read is ``PermissionDenied``) or else the user's
  default cube (the oldest cube the user owns; one is made when there is none).  What the
  framework asks to *remember* goes there, where search, context and the tiers see it.  With a
  sync memory it is resolved when the adapter is made (bad ids and grants fail at once); with
  an async one, on the first call.
* **A private cube** (``private_cube``) holds what only the adapter reads (LangGraph's
  checkpoints): its id is derived from the user id and a name, and it must be *owned* by the
  user: a cube of that id made by someone else (who could share it to read what is written) is
  ``PermissionDenied``, never used.
* **Framework ids become memstrata ids** (``line_id``): an id that is already a valid memstrata
  id (1-128 letters, digits and ``_ . : @ -``) is kept, so the session or thread is recognisable
  in the inspector; any other string is replaced by a stable digest of it.
* **Paths become metadata** (``path_metadata``, ``path_filter``, ``path_of``): a tuple of labels
  such as a LangGraph namespace is stored as one metadata key per level, so a prefix of it is
  a plain metadata equality filter the store answers in SQL.

The errors are memstrata's, as the memory raises them: a ``Client`` raises the first level of
the tree (``NotFoundError``, ``ConflictError``), so adapters catch those, never a leaf such as
``CubeNotFound``.  Nothing here decides a rule of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Union

from memstrata.errors import ConflictError, NotFoundError, PermissionDenied, ValidationError
from memstrata.limits import MAX_FILTER_KEYS, MAX_TOP_K
from memstrata.memory.access import check_id
from memstrata.memory.aio import AsyncMemoryOS
from memstrata.memory.system import MemoryOS
from memstrata.model import Cube, Hit, MemoryItem

if TYPE_CHECKING:  # a peer adapter: named for the checker only (the layering's rule a)
    from memstrata.client import AsyncClient, Client

#: What an adapter may be given as its memory.
Memory = Union[MemoryOS, AsyncMemoryOS, "Client", "AsyncClient"]
T = TypeVar("T")
#: The calls a rule written once makes (``attach_steps``): it yields ``(call, args, kwargs)``
#: and is sent each answer, so a sync ``Backend`` and an ``AsyncBackend`` run the same steps.
Steps = Generator[tuple[str, tuple[Any, ...], dict[str, Any]], Any, T]

#: The memory calls an adapter makes, as its acting user: ``Backend``'s methods of these names
#: (``MemoryOS``'s, less ``user_id=``); ``aio.AsyncBackend`` makes each a coroutine from here.
CALLS = (
    "add", "search", "list_memories", "get", "update", "erase", "transition",
    "get_cube", "list_cubes", "delete_cube",
)  # fmt: skip
#: Hex digits of SHA-256 kept in a derived id: 160 bits, no accidental collision.
DIGEST_CHARS = 40
#: Metadata filter keys a path prefix may use; the rest of a deeper prefix is compared in
#: Python (``path_matches``).  Two keys are left for the adapter's own markers.
PATH_FILTER_KEYS = MAX_FILTER_KEYS - 4
#: The event loop of the ``Backend.offload`` call running in this thread, if any: where an
#: async memory's coroutines are sent.
_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "memstrata_integrations_loop", default=None
)


class Backend:
    """One user's view of the memory an adapter was given, and that user's memory cube.

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient`` (anything
    else is a ``TypeError``).  ``user_id`` is the acting user: required with a ``MemoryOS`` (it
    is created if missing), optional with a client (whose user is the API key's owner; another
    id is a ``ValidationError``).  ``cube_id`` names the memory cube (see the module docs).

    The calls are ``MemoryOS``'s, less ``user_id=``: each is sent as the acting user.  Called in
    a thread that ``offload`` runs, a call to an async memory is awaited on the caller's loop;
    called anywhere else, an ``AsyncMemoryOS`` runs its wrapped ``MemoryOS`` and an
    ``AsyncClient`` is a ``TypeError`` (it has no blocking form: use the adapter's async calls).
    """

    def __init__(self, memory: Memory, *, user_id: str | None, cube_id: str | None) -> None:
        core = checked(memory, user_id)
        self.memory = memory
        self._core = core
        self._claimed = user_id
        self._user: str | None = user_id if core else None
        self._wanted_cube = cube_id
        self._cube: str | None = None
        self._resolving = threading.Lock()  # concurrent first calls resolve user and cube once
        self._aio: Any = None
        self._sync: Any = memory
        if isinstance(memory, AsyncMemoryOS):
            self._aio, self._sync = memory, memory.sync
        elif not core and inspect.iscoroutinefunction(getattr(memory, "me", None)):
            self._aio, self._sync = memory, None
        if self._aio is None:  # a sync memory: the user and cube are checked now
            _ = self.cube_id

    @property
    def is_async(self) -> bool:
        """Whether the memory given is an ``AsyncMemoryOS`` or ``AsyncClient``."""
        return self._aio is not None

    # -- who and where -----------------------------------------------------------------------

    @property
    def user_id(self) -> str:
        """The acting user: ``user_id=``, or a client's API key owner (asked once)."""
        if self._user is None:
            with self._resolving:
                self._user = self._user or owner(self._claimed, self._call("me").user_id)
        return self._user

    @property
    def cube_id(self) -> str:
        """The memory cube's id (resolved once; see the module docs)."""
        if self._cube is None:
            _ = self.user_id  # resolved first: it takes the lock itself
            with self._resolving:
                if self._cube is None:
                    self._cube = self.attach(self._wanted_cube).cube_id
        return self._cube

    def attach(
        self,
        cube_id: str | None = None,
        *,
        name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> Cube:
        """``MemoryOS.attach`` as the acting user: ``cube_id`` (created, owned by the user, when
        missing) or the user's default cube.  A client does it with its own calls (the REST API
        has no attach): the same cube, the same errors."""
        steps = attach_steps(self._core, self.user_id, cube_id, name=name, settings=settings)
        try:
            call, args, kwargs = next(steps)
            while True:
                try:
                    answer = self._call(call, *args, **kwargs)
                except (NotFoundError, ConflictError) as error:  # the steps may expect these
                    call, args, kwargs = steps.throw(error)
                else:
                    call, args, kwargs = steps.send(answer)
        except StopIteration as done:
            found: Cube = done.value
            return found

    # -- the calls (MemoryOS's, as the acting user) --------------------------------------------

    def add(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        cube_id: str,
        session_id: str | None = None,
        expires_at: Any = None,
    ) -> list[str]:
        found: list[str] = self._as_user(
            "add", messages, cube_id=cube_id, session_id=session_id, expires_at=expires_at
        )
        return found

    def search(
        self,
        query: str,
        *,
        cube_ids: Sequence[str],
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        found: list[Hit] = self._as_user(
            "search", query, cube_ids=list(cube_ids), top_k=top_k, filters=filters
        )
        return found

    def list_memories(
        self,
        cube_id: str,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryItem]:
        found: list[MemoryItem] = self._as_user(
            "list_memories", cube_id, filters=filters, limit=limit, offset=offset
        )
        return found

    def session_turns(self, session_id: str) -> Iterator[MemoryItem]:
        """The turns of ``session_id`` in the memory cube, oldest first, read a page of
        ``MAX_TOP_K`` at a time (a chat history, as the frameworks replay it)."""
        offset = 0
        while True:
            page = self.list_memories(
                self.cube_id, limit=MAX_TOP_K, offset=offset,
                filters={"session_id": session_id, "type": "turn"},
            )  # fmt: skip
            yield from page
            if len(page) < MAX_TOP_K:
                return
            offset += MAX_TOP_K

    def get(self, item_id: str, *, cube_id: str) -> MemoryItem:
        found: MemoryItem = self._as_user("get", item_id, cube_id=cube_id)
        return found

    def update(
        self,
        item_id: str,
        *,
        cube_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        expires_at: Any = None,
    ) -> MemoryItem:
        found: MemoryItem = self._as_user(
            "update", item_id, cube_id=cube_id, text=text, metadata=metadata,
            expires_at=expires_at,
        )  # fmt: skip
        return found

    def erase(
        self,
        item_id: str | None = None,
        *,
        cube_id: str,
        session_id: str | None = None,
        reason: str | None = None,
    ) -> int:
        found: int = self._as_user(
            "erase", item_id, cube_id=cube_id, session_id=session_id, reason=reason
        )
        return found

    def transition(self, item_id: str, to: str, *, cube_id: str) -> MemoryItem:
        found: MemoryItem = self._as_user("transition", item_id, to, cube_id=cube_id)
        return found

    def get_cube(self, cube_id: str) -> Cube:
        found: Cube = self._as_user("get_cube", cube_id)
        return found

    def list_cubes(self) -> list[Cube]:
        found: list[Cube] = self._as_user("list_cubes")
        return found

    def delete_cube(self, cube_id: str) -> int:
        found: int = self._as_user("delete_cube", cube_id)
        return found

    # -- running them ------------------------------------------------------------------------

    async def offload(self, work: Callable[..., T], /, *args: Any) -> T:
        """``work(*args)`` (an adapter's sync logic) in a worker thread, its calls to an async
        memory awaited on this event loop, which stays free meanwhile."""
        loop = asyncio.get_running_loop()

        def run() -> T:
            _LOOP.set(loop)
            return work(*args)

        return await asyncio.to_thread(run)

    def _as_user(self, call: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``call`` as the acting user (a client's calls act as its key's owner)."""
        if self._core:
            kwargs["user_id"] = self.user_id
        return self._call(call, *args, **kwargs)

    def _call(self, call: str, /, *args: Any, **kwargs: Any) -> Any:
        loop = _LOOP.get()
        if self._aio is not None and loop is not None:
            pending = getattr(self._aio, call)(*args, **kwargs)
            return asyncio.run_coroutine_threadsafe(pending, loop).result()
        if self._sync is None:
            raise TypeError(
                "this adapter was given an AsyncClient: use its async calls (or give it a Client)"
            )
        return getattr(self._sync, call)(*args, **kwargs)


def checked(memory: Any, user_id: str | None) -> bool:
    """Whether ``memory`` is the core (a ``MemoryOS`` or ``AsyncMemoryOS``) rather than a
    client; ``TypeError`` for anything else, ``ValidationError`` for the core without
    ``user_id``."""
    core = isinstance(memory, (MemoryOS, AsyncMemoryOS))
    if not core and not callable(getattr(memory, "me", None)):
        raise TypeError(
            f"give a MemoryOS, AsyncMemoryOS, Client or AsyncClient, not {type(memory).__name__}"
        )
    if core and user_id is None:
        raise ValidationError("user_id is required with a MemoryOS", hint="user_id='ann'")
    return core


def owner(claimed: str | None, key_owner: Any) -> str:
    """The acting user of a client: its API key's owner; a ``claimed`` one that is anyone else
    is a ``ValidationError``."""
    found = str(key_owner)
    if claimed is not None and claimed != found:
        raise ValidationError(
            f"user_id {claimed!r} is not the API key's owner",
            hint="omit user_id with a client, or use that user's key",
        )
    return found


def attach_steps(
    core: bool,
    user_id: str,
    cube_id: str | None,
    *,
    name: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Steps[Cube]:
    """``attach`` as ``user_id`` written once as the calls it makes, for a sync or an async
    driver: each step yields ``(call, args, kwargs)`` (a client's call, or the core's with the
    user) and is sent its answer, or thrown its ``NotFoundError`` / ``ConflictError``."""
    if core:
        found: Cube = yield "attach", (user_id, cube_id), {"name": name, "settings": settings}
        return found
    if cube_id is None:
        cubes: list[Cube] = yield "list_cubes", (), {}
        owned = [c for c in cubes if c.owner == user_id]
        if owned:
            return owned[0]
        made: Cube = yield "create_cube", (user_id,), {}
        return made
    try:
        found = yield "get_cube", (cube_id,), {}
        return found
    except NotFoundError:
        pass
    try:
        made = yield "create_cube", (name or cube_id,), {"cube_id": cube_id, "settings": settings}
    except ConflictError:  # made meanwhile (another thread's first call): read it
        found = yield "get_cube", (cube_id,), {}
    else:
        found = made
    return found


def digest(*parts: str) -> str:
    """A stable hex digest of ``parts`` (length-prefixed: ``("a", "bc")`` is not ``("ab", "c")``)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:DIGEST_CHARS]


class OnBackend:
    """Mixin of an adapter acting through ``self.backend``: its acting user and its cube, read
    from the backend (the same two properties on every sync adapter)."""

    backend: Backend

    @property
    def user_id(self) -> str:
        """The acting user."""
        return self.backend.user_id

    @property
    def cube_id(self) -> str:
        """The adapter's cube: where what it stores goes, and what it reads."""
        return self.backend.cube_id


def line_id(value: str, prefix: str) -> str:
    """``value`` when it is a valid memstrata id, else ``prefix-<digest of value>`` (stable)."""
    try:
        check_id(value, "id")
    except ValidationError:
        return f"{prefix}-{digest(value)}"
    return value


def private_cube(
    backend: Backend,
    kind: str,
    name: str,
    *,
    settings: Mapping[str, Any] | None = None,
) -> str:
    """The id of the acting user's own cube for ``name`` (``kind`` is a short prefix such as
    ``lgt``), created on first use with the tier ``settings``.  Its id is derived from the user
    and the name, so two users never share one; a cube of that id owned by anyone else is
    ``PermissionDenied``."""
    user_id = backend.user_id
    cube_id = private_cube_id(user_id, kind, name)
    display = f"{kind} {name}"[:120].replace("\n", " ")
    cube = backend.attach(cube_id, name=display if display.strip() else kind, settings=settings)
    if cube.owner != user_id:  # another's cube, shared with the user: never write there
        raise PermissionDenied(user_id, cube_id, "own")
    return cube.cube_id


def private_cube_id(user_id: str, kind: str, name: str) -> str:
    """The id ``private_cube`` gives ``user_id``'s cube for ``name``."""
    return f"{kind}-{digest(user_id, name)}"


def path_metadata(key: str, path: Sequence[str]) -> dict[str, Any]:
    """Metadata recording ``path``: ``{key: [labels], key.depth: n, key.0: label0, …}``."""
    labels = list(path)
    out: dict[str, Any] = {key: labels, f"{key}.depth": len(labels)}
    out.update({f"{key}.{i}": label for i, label in enumerate(labels)})
    return out


def path_filter(key: str, prefix: Sequence[str], *, exact: bool = False) -> dict[str, Any]:
    """A metadata equality filter for paths starting with ``prefix`` (``exact``: equal to it).

    At most ``PATH_FILTER_KEYS`` levels go to the store; check deeper ones with
    ``path_matches``."""
    labels = list(prefix)[:PATH_FILTER_KEYS]
    out: dict[str, Any] = {f"{key}.{i}": label for i, label in enumerate(labels)}
    if exact:
        out[f"{key}.depth"] = len(prefix)
    return out


def path_of(key: str, metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The path ``path_metadata`` recorded under ``key``, or None when there is none."""
    labels = metadata.get(key)
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        return None
    return tuple(labels)


def path_matches(path: Sequence[str], prefix: Sequence[str], *, exact: bool = False) -> bool:
    """Whether ``path`` starts with (``exact``: equals) ``prefix``."""
    if exact:
        return tuple(path) == tuple(prefix)
    return tuple(path[: len(prefix)]) == tuple(prefix)
