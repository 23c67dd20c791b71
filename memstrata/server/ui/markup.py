"""HTML built in Python, escaped by construction: ``Markup`` is text already safe to send.

``tag("a", "Bob & co", href="/ui")`` escapes every ``str`` child and every attribute value;
only a ``Markup`` child (what ``tag`` and ``join`` return) passes as it is, so a value read from
memory can reach a page only escaped.  ``page`` wraps a body in the inspector's layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["Child", "Markup", "join", "page", "table", "tag"]


class Markup(str):
    """HTML that is safe to send as it is (made by this module only)."""


#: What a tag may hold: markup, text (escaped), a number, or nothing.
Child = Markup | str | int | float | None

_VOID = frozenset({"input", "br", "meta", "link", "hr"})


def text(value: Child) -> Markup:
    """``value`` as HTML: markup kept, anything else escaped (None is empty)."""
    if value is None:
        return Markup("")
    if isinstance(value, Markup):
        return value
    return Markup(escape(str(value)))


def join(children: Iterable[Child], sep: str = "") -> Markup:
    """The children side by side (``sep`` is escaped)."""
    return Markup(escape(sep).join(text(c) for c in children))


def tag(name: str, /, *children: Child, **attrs: str | int | bool | None) -> Markup:
    """``<name attrs>children</name>``; an attribute None or False is left out, True is bare.

    A trailing underscore is dropped from attribute names (``class_``), and ``_`` in the middle
    becomes ``-`` (``aria_label``).
    """
    parts = [name]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        parts.append(attr if value is True else f'{attr}="{escape(str(value), quote=True)}"')
    opening = f"<{' '.join(parts)}>"
    if name in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{join(children)}</{name}>")


def table(headers: Sequence[str], rows: Iterable[Sequence[Child]], empty: str = "none") -> Markup:
    """A table of ``rows`` under ``headers``; ``empty`` in place of a table without rows."""
    body = [tag("tr", *(tag("td", cell) for cell in row)) for row in rows]
    if not body:
        return tag("p", empty, class_="empty")
    head = tag("thead", tag("tr", *(tag("th", h) for h in headers)))
    return tag("table", head, tag("tbody", *body))


def page(title: str, body: Child, *, nav: Child = None) -> Markup:
    """A whole HTML document: ``title``, the navigation bar ``nav`` and ``body``."""
    head = tag(
        "head",
        tag("meta", charset="utf-8"),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("title", f"{title} · memstrata"),
        tag("link", rel="stylesheet", href="/ui/style.css"),
    )
    header = tag("header", tag("a", "memstrata inspector", href="/ui", class_="brand"), nav)
    main = tag("main", tag("h1", title), body)
    return Markup("<!doctype html>" + tag("html", head, tag("body", header, main), lang="en"))
