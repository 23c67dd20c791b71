"""Core errors as the SDK's: one line of message and hint, never a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from memstrata.errors import MemstrataError

P = ParamSpec("P")
R = TypeVar("R")


def one_line(exc: MemstrataError) -> str:
    """The error's message and hint on one line."""
    return " ".join(str(exc).split())


def reported(error: type[Exception]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: the function with a ``MemstrataError`` re-raised as ``error`` (the SDK's
    ``ToolError`` or ``ResourceError``) carrying its one line.

    The signature and docstring stay the function's (``functools.wraps``): the SDK reads the
    tool's input schema and description from them.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except MemstrataError as exc:
                raise error(one_line(exc)) from exc

        return call

    return decorate
