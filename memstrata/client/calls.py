"""``Call`` and ``AsyncCall``: a client method that runs one exchange of a part, written once.

``search = Call("_reading", Reading.search)`` makes ``Client().search(...)`` run the exchange
``Reading.search`` of the instance's ``_reading`` part on its transport (``client.transport``),
and ``AsyncCall`` the same as a coroutine on the async transport.  On the class each is a
function with the part's signature (the result type in place of ``Exchange[…]``) and docstring,
so ``help`` and ``inspect.signature`` show the real thing.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memstrata.client.transport import Exchange

Part = TypeVar("Part")
P = ParamSpec("P")
R = TypeVar("R")


class _Method(Generic[Part, P, R]):
    """What both descriptors share: the part, its function, and the method on the class."""

    def __init__(self, part: str, function: Callable[Concatenate[Part, P], Exchange[R]]) -> None:
        self.part = part
        self.function = function
        self.__doc__ = function.__doc__
        self._method = self._make()
        self._method.__signature__ = _result_signature(function)  # type: ignore[attr-defined]

    def _make(self) -> Callable[..., Any]:
        raise NotImplementedError

    def _exchange(self, client: object, args: Any, kwargs: Any) -> Exchange[R]:
        return self.function(getattr(client, self.part), *args, **kwargs)

    def __set_name__(self, owner: type, name: str) -> None:
        self._method.__qualname__ = f"{owner.__name__}.{name}"


class Call(_Method[Part, P, R]):
    """A method of ``Client``: the part's exchange, run on ``client._transport``."""

    def _make(self) -> Callable[..., Any]:
        @functools.wraps(self.function, assigned=("__module__", "__name__", "__doc__"))
        def method(client: Any, /, *args: Any, **kwargs: Any) -> Any:
            return client._transport.run(self._exchange(client, args, kwargs))

        return method

    @overload
    def __get__(self, instance: None, owner: type) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, instance: object, owner: type) -> Any:
        return self._method if instance is None else types.MethodType(self._method, instance)


class AsyncCall(_Method[Part, P, R]):
    """A method of ``AsyncClient``: the part's exchange, awaited on ``client._transport``."""

    def _make(self) -> Callable[..., Any]:
        @functools.wraps(self.function, assigned=("__module__", "__name__", "__doc__"))
        async def method(client: Any, /, *args: Any, **kwargs: Any) -> Any:
            return await client._transport.run(self._exchange(client, args, kwargs))

        return method

    @overload
    def __get__(
        self, instance: None, owner: type
    ) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, instance: object, owner: type) -> Any:
        return self._method if instance is None else types.MethodType(self._method, instance)


def _result_signature(function: Callable[..., Any]) -> inspect.Signature:
    """``function``'s signature with the result of its ``Exchange[…]`` as the return type."""
    signature = inspect.signature(function)
    result = signature.return_annotation
    if isinstance(result, str) and result.startswith("Exchange[") and result.endswith("]"):
        result = result[len("Exchange[") : -1]
    return signature.replace(return_annotation=result)
