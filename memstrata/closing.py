"""``Closing`` and ``AsyncClosing``: the context-manager half of every object that holds
resources, for ``with`` and ``async with``."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_T = TypeVar("_T", bound="Closing")
_A = TypeVar("_A", bound="AsyncClosing")


class Closing:
    """Mixin: ``with obj:`` calls ``obj.close()`` on the way out, however the block ends."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClosing:
    """Mixin: ``async with obj:`` awaits ``obj.aclose()`` on the way out, however the block ends."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _A) -> _A:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
