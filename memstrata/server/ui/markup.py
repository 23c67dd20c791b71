"""HTML built in Python, escaped by construction: ``Markup`` is text already safe to send.

``tag("a", "Bob & co", href="/ui")`` escapes every ``str`` child and every attribute value;
only a ``Markup`` child (what ``tag`` and ``join`` return) passes as it is, so a value read from
memory can reach a page only escaped.  ``page`` wraps a body in the inspector's layout.

Escaping also shows the bidirectional formatting controls (``BIDI``: the embeddings, overrides
and isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E, U+200F and U+061C) as visible
escapes, ``⟨U+202E⟩``: raw, one of them in a name or a text would reorder what the page shows
after it (``invoice`` U+202E ``fdp.exe`` reads ``invoiceexe.pdf``).  Every text and every attribute
gets this, but ``value``: a form field sends its value back, and must send what was typed (the
field is a box of its own, so its controls cannot reorder the page around it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["BIDI", "Child", "Markup", "join", "page", "shown", "table", "tag"]

#: The bidirectional formatting controls a page shows as visible escapes, never raw.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_VISIBLE = str.maketrans({c: f"\u27e8U+{ord(c):04X}\u27e9" for c in BIDI})


class Markup(str):
    """HTML that is safe to send as it is (made by this module only)."""


#: What a tag may hold: markup, text (escaped), a number, or nothing.
Child = Markup | str | int | float | None

_VOID = frozenset({"input", "br", "meta", "link", "hr"})


def shown(value: str) -> str:
    """``value`` with each of ``BIDI`` replaced by its visible escape (``⟨U+202E⟩``)."""
    return value.translate(_VISIBLE)


def text(value: Child) -> Markup:
    """``value`` as HTML: markup kept, anything else escaped, bidi controls made visible (None
    is empty)."""
    if value is None:
        return Markup("")
    if isinstance(value, Markup):
        return value
    return Markup(escape(shown(str(value))))


def join(children: Iterable[Child], sep: str = "") -> Markup:
    """The children side by side (``sep`` is escaped)."""
    return Markup(text(sep).join(text(c) for c in children))


def tag(name: str, /, *children: Child, **attrs: str | int | bool | None) -> Markup:
    """``<name attrs>children</name>``; an attribute None or False is left out, True is bare.

    A trailing underscore is dropped from attribute names (``class_``), and ``_`` in the middle
    becomes ``-`` (``aria_label``).  Attribute values are escaped, with bidi controls made
    visible but in ``value`` (see the module's docs).
    """
    parts = [name]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        raw = str(value) if attr == "value" else shown(str(value))
        parts.append(attr if value is True else f'{attr}="{escape(raw, quote=True)}"')
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
