"""``Delegate``: a ``MemoryOS`` method that is a method of one of its parts, written once.

``MemoryOS`` is the one object every surface calls, but its calls live in the part that owns
the concern (``memory.items``, ``memory.reading``, …).  ``add = Delegate("_items", Items.add)``
makes ``MemoryOS().add`` the bound ``Items.add`` of the instance's ``_items`` part: the same
signature, the same docstring, no wrapper to keep in step.  On the class it is the part's
function, so ``help(MemoryOS.add)`` and ``inspect.signature`` show the real thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

Part = TypeVar("Part")
P = ParamSpec("P")
R = TypeVar("R")


class Delegate(Generic[Part, P, R]):
    """A descriptor forwarding to ``function`` of the part held in attribute ``part``."""

    def __init__(self, part: str, function: Callable[Concatenate[Part, P], R]) -> None:
        self._part = part
        self._function = function
        self.__doc__ = function.__doc__

    @overload
    def __get__(self, instance: None, owner: type) -> Callable[Concatenate[Part, P], R]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, instance: object, owner: type) -> Any:
        if instance is None:
            return self._function
        part = getattr(instance, self._part)
        return self._function.__get__(part, type(part))
