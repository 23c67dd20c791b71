"""``AsyncMemoryOS``: every call of ``MemoryOS`` as a coroutine, run in a bounded thread pool.

There is no second copy of the core.  When this module is imported, each ``Delegate`` of
``MemoryOS`` (its delegation table, ``memory.delegate``) gives ``AsyncMemoryOS`` a coroutine
method of the same name, signature and docstring that runs the sync call in the instance's
thread pool; a call added to ``MemoryOS`` is async the moment it exists.

* ``AsyncMemoryOS.open(...)`` takes ``MemoryOS.open``'s arguments (plus ``threads``) and opens
  the database in the pool, off the event loop: ``amos = await AsyncMemoryOS.open(db)`` or
  ``async with AsyncMemoryOS.open(db) as amos:``.  ``AsyncMemoryOS(mos)`` wraps a ``MemoryOS``
  already open (the caller keeps closing it unless ``owns=True``).
* A call whose sync form returns an iterator (``chat_stream``) returns an ``AsyncPieces``: each
  piece is read in the pool (``async for piece in await amos.chat_stream(...)``); ``aclose``
  stops it early, as closing the sync iterator does.
* ``close`` is ``aclose``: calls already made finish, new ones are refused (``StorageError``),
  then the pool and (when owned) the ``MemoryOS`` are closed.
* Of the other attributes only ``settings`` (a read of what is in force) and
  ``RUNTIME_SETTINGS`` are forwarded.  The parts (``store``, ``embedder``, ``scheduler``…) are
  sync objects whose calls block: reach them through ``.sync``, the wrapped ``MemoryOS``.

Cancellation: the thread is never killed.  A cancelled call that had not started in the pool
never runs; one already running goes on to its end in its thread, and the core's writes are
each one transaction, so what it writes is there whole or not at all.  The awaiting coroutine
is released at once; ``aclose`` waits for such calls.  A result that holds resources (an
iterator, an opened ``MemoryOS``) whose caller was cancelled is closed when its call ends.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memstrata.closing import AsyncClosing, Closing
from memstrata.config import Settings
from memstrata.embed import Embedder
from memstrata.errors import StorageError
from memstrata.limits import MAX_ASYNC_THREADS
from memstrata.memory.access import check_int
from memstrata.memory.delegate import Delegate
from memstrata.memory.system import MemoryOS

__all__ = ["THREADS", "AsyncMemoryOS", "AsyncPieces", "Opening", "delegated_calls"]

#: Threads of an ``AsyncMemoryOS``'s pool unless told: enough for a few searches while an add
#: embeds, few enough that one process's event loop cannot flood the database with writers.
THREADS = 8
T = TypeVar("T")
_END = object()  # what ``next`` gives at the end of an iterator, in place of StopIteration


def delegated_calls(cls: type = MemoryOS) -> list[str]:
    """The names of ``cls``'s calls: its ``Delegate`` attributes, in the order it names them."""
    return [name for name, value in vars(cls).items() if isinstance(value, Delegate)]


class AsyncMemoryOS(AsyncClosing):
    """``MemoryOS`` for ``async`` code: each call awaited, run in a pool of ``threads`` threads.

    ``mos`` is an open ``MemoryOS``; ``owns`` says whether ``aclose`` closes it too (``open``
    sets it).  ``threads`` bounds how many calls run at once (1 to ``MAX_ASYNC_THREADS``; more
    wait their turn in the pool's queue).  See the module docs for cancellation.
    """

    RUNTIME_SETTINGS = MemoryOS.RUNTIME_SETTINGS

    def __init__(self, mos: MemoryOS, *, threads: int = THREADS, owns: bool = False) -> None:
        if not isinstance(mos, MemoryOS):
            raise TypeError(f"AsyncMemoryOS wraps a MemoryOS, not {type(mos).__name__}")
        check_int(threads, "threads", 1, MAX_ASYNC_THREADS)
        self._mos = mos
        self._owns = owns
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="memstrata-async")
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | None = None,
        *,
        embedder: str | Embedder | None = None,
        settings: Settings | None = None,
        threads: int = THREADS,
        **overrides: Any,
    ) -> Opening:
        """``MemoryOS.open(path, embedder=…, settings=…, **overrides)`` in a thread, off the
        event loop, wrapped with a pool of ``threads``; the ``AsyncMemoryOS`` owns it.

        Await the result, or use it with ``async with`` (closed on the way out).  A cancelled
        open closes the ``MemoryOS`` when its opening ends.
        """
        check_int(threads, "threads", 1, MAX_ASYNC_THREADS)
        opener = functools.partial(
            MemoryOS.open, path, embedder=embedder, settings=settings, **overrides
        )
        return Opening(lambda: _open(opener, threads))

    @property
    def sync(self) -> MemoryOS:
        """The wrapped ``MemoryOS``: its calls block (use them from a thread, or not at all)."""
        return self._mos

    @property
    def settings(self) -> Settings:
        """The settings in force (``configure`` replaces them); a read, no call."""
        return self._mos.settings

    @property
    def closed(self) -> bool:
        """Whether ``aclose`` was called: new calls are refused."""
        return self._closed

    def submit(self, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Start ``call(*args, **kwargs)`` in the pool; ``StorageError`` once closed."""
        if self._closed:
            raise StorageError("this AsyncMemoryOS is closed", hint="open it again")
        try:
            return self._pool.submit(call, *args, **kwargs)
        except RuntimeError as exc:  # shut down by another event loop meanwhile
            raise StorageError("this AsyncMemoryOS is closed", hint="open it again") from exc

    async def run(self, call: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)`` in the pool, awaited; an iterator result as ``AsyncPieces``.

        Cancelled: the call does not start, or (already running) ends in its thread, where an
        iterator it returns is closed.
        """
        result = await _awaited(self.submit(call, *args, **kwargs))
        return AsyncPieces(self, result) if isinstance(result, Iterator) else result

    async def aclose(self) -> None:
        """Refuse new calls, let those already made finish, then close the pool and (when owned)
        the ``MemoryOS``.  Idempotent; once begun it completes even if the caller is cancelled."""
        if self._closed:
            return
        self._closed = True
        await _awaited(_in_new_thread(self._close_now))

    def _close_now(self) -> None:
        try:
            self._pool.shutdown(wait=True)
        finally:
            if self._owns:
                self._mos.close()

    if TYPE_CHECKING:  # the calls are set below, from MemoryOS's table; a checker sees Any

        def __getattr__(self, name: str) -> Any: ...


class Opening(Awaitable[AsyncMemoryOS]):
    """What ``AsyncMemoryOS.open`` returns: await it, or enter it with ``async with``."""

    def __init__(self, start: Callable[[], Coroutine[Any, Any, AsyncMemoryOS]]) -> None:
        self._start = start
        self._opened: AsyncMemoryOS | None = None

    def __await__(self) -> Generator[Any, None, AsyncMemoryOS]:
        return self._start().__await__()

    async def __aenter__(self) -> AsyncMemoryOS:
        self._opened = await self._start()
        return self._opened

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._opened is not None:
            await self._opened.aclose()


class AsyncPieces(AsyncIterator[T], Generic[T]):
    """The async form of an iterator a call returned: each ``next`` runs in the pool.

    A cancelled ``__anext__`` loses no piece: the next one is the piece its thread was reading.
    ``aclose`` closes the sync iterator (for ``chat_stream``: stops it, storing nothing).
    """

    def __init__(self, owner: AsyncMemoryOS, iterator: Iterator[T]) -> None:
        self._owner = owner
        self._iterator = iterator
        self._pending: Future[Any] | None = None

    def __aiter__(self) -> AsyncPieces[T]:
        return self

    async def __anext__(self) -> T:
        if self._pending is None:
            self._pending = self._owner.submit(next, self._iterator, _END)
        pending = self._pending
        try:
            piece = await asyncio.wrap_future(pending)
        finally:
            if pending.done():  # read (or cancelled before it started): the next call reads on
                self._pending = None
        if piece is _END:
            raise StopAsyncIteration
        return piece  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Stop early: wait for a piece being read, then close the iterator (in the pool)."""
        close = getattr(self._iterator, "close", None)
        pending, self._pending = self._pending, None
        if pending is not None:
            await asyncio.wait([asyncio.wrap_future(pending)])
        if close is not None:
            await asyncio.wrap_future(self._owner.submit(close))


async def _open(opener: Callable[[], MemoryOS], threads: int) -> AsyncMemoryOS:
    """Open a ``MemoryOS`` in a thread of its own and wrap it (owned)."""
    mos = await _awaited(_in_new_thread(opener))
    return AsyncMemoryOS(mos, threads=threads, owns=True)


async def _awaited(future: Future[T]) -> T:
    """``future``'s result, awaited.  On cancellation a call already running goes on, and a
    result that holds resources is closed when it comes."""
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        future.add_done_callback(_close_result)
        raise


def _close_result(future: Future[Any]) -> None:
    """Close what a call whose caller went away returned: an iterator, a ``MemoryOS``."""
    if future.cancelled() or future.exception() is not None:
        return
    result = future.result()
    close = getattr(result, "close", None)
    if isinstance(result, (Closing, Iterator)) and callable(close):
        close()


def _in_new_thread(call: Callable[[], T]) -> Future[T]:
    """Run ``call`` in a new thread (not the pool: it may be full or shutting down).  The future
    is running from the start, so a caller's cancellation cannot stop it half-begun."""
    future: Future[T] = Future()
    future.set_running_or_notify_cancel()

    def work() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # handed to the awaiting coroutine
            future.set_exception(exc)

    threading.Thread(target=work, name="memstrata-async-open", daemon=True).start()
    return future


def _async_form(name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The coroutine method ``name``: ``MemoryOS.name`` run in the instance's pool."""
    function = getattr(MemoryOS, name)  # the part's function: its signature and docstring

    @functools.wraps(function)
    async def call(self: AsyncMemoryOS, /, *args: Any, **kwargs: Any) -> Any:
        return await self.run(getattr(self.sync, name), *args, **kwargs)

    call.__qualname__ = f"AsyncMemoryOS.{name}"
    call.__module__ = __name__
    return call


for _name in delegated_calls():
    # A call of MemoryOS named like AsyncMemoryOS's own attributes would silently replace one.
    if _name in vars(AsyncMemoryOS):
        raise TypeError(f"MemoryOS.{_name} clashes with an attribute of AsyncMemoryOS")
    setattr(AsyncMemoryOS, _name, _async_form(_name))
