"""Errors as the client sees them: one line, never a traceback.

A core error becomes the SDK's ``ToolError``/``ResourceError`` with its message and hint
(``reported``); arguments that fail the tool's input schema are listed field by field
(``invalid_arguments``), without pydantic's documentation URLs or the rejected values.  A
database failure (status 500) is reported by an id only: its message names the database's host,
port, user and name, which is the operator's to read (in the log, under that id), not a client's.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from pydantic import ValidationError

from memstrata.errors import MemstrataError

log = logging.getLogger("memstrata.server")

P = ParamSpec("P")
R = TypeVar("R")


def one_line(exc: MemstrataError) -> str:
    """The error's message and hint on one line (a database failure's: an id, see above)."""
    if exc.status == 500:
        error_id = secrets.token_hex(6)
        log.error("MCP call failed (%s, id %s): %s", exc.code, error_id, exc, exc_info=exc)
        return f"the database failed, id {error_id} (report the id to the server's operator)"
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
