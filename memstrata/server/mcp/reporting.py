"""Errors as the client sees them: one line, never a traceback.

A core error becomes the SDK's ``ToolError``/``ResourceError`` with its message and hint
(``reported``); arguments that fail the tool's input schema are listed field by field
(``invalid_arguments``), without pydantic's documentation URLs or the rejected values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from pydantic import ValidationError

from memstrata.errors import MemstrataError

P = ParamSpec("P")
R = TypeVar("R")


def one_line(exc: MemstrataError) -> str:
    """The error's message and hint on one line."""
    return " ".join(str(exc).split())


def invalid_arguments(exc: ValidationError) -> str:
    """``invalid arguments: FIELD: what is wrong; …`` on one line."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{field}: {' '.join(error['msg'].split())}")
    return "invalid arguments: " + "; ".join(problems)


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
