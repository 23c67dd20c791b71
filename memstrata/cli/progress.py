"""A progress bar on stderr for long commands, drawn on a terminal only.

The core reports progress through a plain callback and knows nothing of click:
``progress(n, total)`` says that ``n`` more of ``total`` units (turns, items, cubes) are done; the
first call is ``(0, total)`` and the ``n`` add up to ``total``.  ``progress_bar`` is that callback
drawn as click's bar, opened at the first call because the total is often known only inside the
core (the items of a cube, of a MemCube).

When stderr is not a terminal nothing at all is written, not even the label click would print
once: piped or captured output (``--json`` included) stays exactly the command's result.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import click

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(n, total)`` callback drawing a bar called ``label`` on stderr, if stderr is
    a terminal (else a callback that does nothing); the bar is finished on leaving."""
    if not sys.stderr.isatty():
        yield _untold
        return
    with ExitStack() as stack:
        yield _Bar(label, stack)


class _Bar:
    """click's bar, opened (in ``stack``) at the first report, when the total is known."""

    def __init__(self, label: str, stack: ExitStack) -> None:
        self._label = label
        self._stack = stack
        self._update: Callable[[int], None] | None = None

    def __call__(self, n: int, total: int) -> None:
        if self._update is None:
            bar = click.progressbar(length=total, label=self._label, file=sys.stderr)
            self._update = self._stack.enter_context(bar).update
        self._update(n)


def _untold(n: int, total: int) -> None:
    """Nothing drawn: stderr is not a terminal."""
