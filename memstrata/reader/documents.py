"""Documents: uploaded bytes → text → chunks with character spans (``add(document)``).

``parse_document`` reads ``.txt``, ``.md``, ``.json`` and ``.pdf`` from bytes (never from a path a
client names).  ``chunk_text`` splits text into chunks of at most ``size`` characters that end at
paragraph breaks where they can, else at sentence ends, else at spaces; consecutive chunks share
up to ``overlap`` characters of whole sentences or paragraphs.  Each chunk's ``start``/``end`` is its
span in the parsed text, so ``text[start:end] == chunk.text``.

Reading is bounded while it is done, never after (issue 24), each bound a ``ValidationError`` that
names it:

* the text may have at most ``limits.MAX_DOCUMENT_CHARS`` characters, counted as it is made: a
  ``.txt``/``.md`` file too large to hold fewer is refused undecoded, a ``.json`` file's lines and a
  PDF's pages stop as soon as the count passes the bound;
* a ``.json`` file holds at most ``MAX_JSON_VALUES`` values (counted before parsing), and each
  line's key path is cut at ``MAX_JSON_PATH_CHARS`` characters (ending "…");
* a PDF has at most ``MAX_DOCUMENT_PAGES`` pages, at most ``MAX_DOCUMENT_CONTENT_BYTES`` bytes of
  decompressed page content in all (a page's content counted for every page that shows it), and
  its reading takes at most ``MAX_DOCUMENT_CPU_S`` seconds of this thread's CPU time, checked
  between pages and, through pypdf's operator visitor, while a page is read.

The text then passes the rule of every stored text (``limits.check_text``): NUL or a lone surrogate
in a ``.txt``, ``.md`` or ``.json`` file is refused as in any message; in a PDF they are artefacts of
its fonts, so NUL is dropped and a lone surrogate becomes U+FFFD.

pypdf's warnings about a damaged file ("EOF marker not found") are not logged: a PDF that cannot be
read is a ``ValidationError`` that says so, and one read despite damage needs no warning.
"""

from __future__ import annotations

import io
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from memstrata.errors import ValidationError
from memstrata.limits import (
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENT_CONTENT_BYTES,
    MAX_DOCUMENT_CPU_S,
    MAX_DOCUMENT_PAGES,
    MAX_JSON_PATH_CHARS,
    MAX_JSON_VALUES,
    check_text,
)

SUFFIXES = (".txt", ".md", ".json", ".pdf")
_PARAGRAPH = re.compile(r"\n\s*\n")
# A sentence ends at . ! ? (or their CJK forms) followed by space, or at a CJK stop.
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its text and its span ``[start, end)`` in the parsed text."""

    text: str
    start: int
    end: int


def parse_document(filename: str, data: bytes) -> str:
    """The text of a document, chosen by the file name's suffix.

    Raises ``ValidationError`` for another suffix, undecodable or malformed content, an encrypted
    PDF, or a document with no text.
    """
    suffix = PurePath(filename).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValidationError(
            f"cannot read {filename!r}: unsupported document type {suffix or '(none)'!r}",
            hint=f"upload one of: {', '.join(SUFFIXES)}",
        )
    if suffix == ".pdf":
        text = _storable(_pdf_text(filename, data))
    elif suffix == ".json":
        text = _json_text(filename, _decode(filename, data))
    else:
        # UTF-8 spends at most 4 bytes on a character (and 3 on a byte order mark): more bytes
        # than that can only be too long, so they are refused before being decoded.
        if len(data) > 4 * MAX_DOCUMENT_CHARS + 3:
            raise _too_long(filename, f"more than {MAX_DOCUMENT_CHARS}")
        text = _decode(filename, data)
    if len(text) > MAX_DOCUMENT_CHARS:
        raise _too_long(filename, str(len(text)))
    check_text(text, f"the text of {filename!r}", MAX_DOCUMENT_CHARS)
    if not text.strip():
        raise ValidationError(f"{filename!r} contains no text")
    return text


def _too_long(filename: str, size: str) -> ValidationError:
    return ValidationError(
        f"{filename!r} has {size} characters of text; a document may have {MAX_DOCUMENT_CHARS}",
        hint="split it into several documents",
    )


def chunk_text(text: str, size: int, overlap: int) -> list[Chunk]:
    """``text`` as chunks of at most ``size`` characters (see the module docstring)."""
    if size < 1:
        raise ValidationError("chunk size must be at least 1")
    if not 0 <= overlap < size:
        raise ValidationError("chunk overlap must be from 0 to the chunk size - 1")
    units = [_trimmed(text, *u) for u in _units(text, size) if text[u[0] : u[1]].strip()]
    chunks: list[Chunk] = []
    first = 0
    while first < len(units):
        last = first
        while last + 1 < len(units) and units[last + 1][1] - units[first][0] <= size:
            last += 1
        start, end = units[first][0], units[last][1]
        chunks.append(Chunk(text[start:end], start, end))
        if last + 1 == len(units):
            break
        # The next chunk starts with the trailing units that fit in ``overlap``, and always
        # moves forward by at least one unit.
        nxt = last + 1
        while nxt - 1 > first and end - units[nxt - 1][0] <= overlap:
            nxt -= 1
        first = nxt
    return chunks


def _units(text: str, size: int) -> list[tuple[int, int]]:
    """Spans of paragraphs, or of sentences (then words) where a paragraph exceeds ``size``."""
    spans: list[tuple[int, int]] = []
    for start, end in _split(text, 0, len(text), _PARAGRAPH):
        if end - start <= size:
            spans.append((start, end))
            continue
        for s_start, s_end in _split(text, start, end, _SENTENCE):
            if s_end - s_start <= size:
                spans.append((s_start, s_end))
            else:
                spans.extend(_words(text, s_start, s_end, size))
    return spans


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """The span without its leading and trailing whitespace (the span holds some text)."""
    while text[start].isspace():
        start += 1
    while text[end - 1].isspace():
        end -= 1
    return start, end


def _split(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """The spans of ``text[start:end]`` between matches of ``pattern``."""
    spans, at = [], start
    for match in pattern.finditer(text, start, end):
        if match.start() > at:
            spans.append((at, match.start()))
        at = match.end()
    if at < end:
        spans.append((at, end))
    return spans


def _words(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """Spans of at most ``size`` characters, cut at the last space that fits (or hard)."""
    spans = []
    while end - start > size:
        cut = text.rfind(" ", start + 1, start + size + 1)
        cut = cut if cut > start else start + size
        spans.append((start, cut))
        start = cut
        while start < end and text[start] == " ":
            start += 1
    if start < end:
        spans.append((start, end))
    return spans


def _decode(filename: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{filename!r} is not UTF-8 text ({exc.reason})") from exc


def _json_text(filename: str, text: str) -> str:
    """One ``path: value`` line per leaf, so every value is findable by its key.

    The lines are counted as they are made and stop past ``MAX_DOCUMENT_CHARS`` (a leaf under a
    long key path repeats the path: a 1 MB file could make gigabytes of lines).
    """
    # Each value but the first follows a comma or opens with a bracket; those inside strings are
    # counted too, which only errs towards refusing (such a file is too long to keep anyway).
    values = text.count(",") + text.count("[") + text.count("{") + 1
    if values > MAX_JSON_VALUES:
        raise ValidationError(
            f"{filename!r} holds more than {MAX_JSON_VALUES} JSON values",
            hint="split it into several documents",
        )
    lines = _Lines(filename)
    try:
        _leaves(json.loads(text), "", lines)
    except RecursionError as exc:
        raise ValidationError(f"{filename!r} is JSON nested too deeply to read") from exc
    except ValueError as exc:
        raise ValidationError(f"{filename!r} is not valid JSON: {exc}") from exc
    return "\n".join(lines.lines)


class _Lines:
    """The lines of a JSON document's text, refused as soon as they pass ``MAX_DOCUMENT_CHARS``."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.lines: list[str] = []
        self.size = -1  # n lines have n - 1 newlines between them

    def add(self, line: str) -> None:
        self.size += len(line) + 1
        if self.size > MAX_DOCUMENT_CHARS:
            raise _too_long(self.filename, f"more than {MAX_DOCUMENT_CHARS}")
        self.lines.append(line)


def _leaves(value: Any, path: str, lines: _Lines) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _leaves(inner, _child(path, "." if path else "", str(key)), lines)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            _leaves(inner, _child(path, "", f"[{i}]"), lines)
    elif value is not None:
        lines.add(f"{path}: {value}" if path else str(value))


_CUT = "…"


def _child(path: str, sep: str, name: str) -> str:
    """``path + sep + name``, cut to ``MAX_JSON_PATH_CHARS`` characters ending "…" when longer
    (the inner paths of a cut path are that same path).  A long key is sliced before it is joined,
    so no path longer than the bound is ever built."""
    if len(path) >= MAX_JSON_PATH_CHARS:
        return path if path.endswith(_CUT) else path[: MAX_JSON_PATH_CHARS - 1] + _CUT
    joined = path + sep + name[:MAX_JSON_PATH_CHARS]
    if len(joined) <= MAX_JSON_PATH_CHARS:
        return joined
    return joined[: MAX_JSON_PATH_CHARS - 1] + _CUT


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(text: str) -> str:
    """A PDF's text without NUL, its lone surrogates replaced by U+FFFD (font artefacts)."""
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def _pdf_text(filename: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    if b"%PDF-" not in data[:1024]:
        raise ValidationError(f"{filename!r} is not a PDF (it has no %PDF- header)")
    _quiet_pypdf()
    budget = _Budget(filename)
    pages: list[str] = []
    size = 0
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValidationError(f"{filename!r} is an encrypted PDF", hint="upload it unlocked")
        count = len(reader.pages)
        if count > MAX_DOCUMENT_PAGES:
            raise ValidationError(
                f"{filename!r} has {count} pages; a PDF may have {MAX_DOCUMENT_PAGES}",
                hint="split it into several documents",
            )
        for page in reader.pages:
            budget.content(_content_bytes(page))
            pages.append((page.extract_text(visitor_operand_before=budget.visit) or "").strip())
            budget.check()
            size += len(pages[-1]) + 2
            if size > MAX_DOCUMENT_CHARS:
                raise _too_long(filename, f"more than {MAX_DOCUMENT_CHARS}")
    except ValidationError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise ValidationError(f"{filename!r} is not a readable PDF: {exc}") from exc
    return "\n\n".join(p for p in pages if p)


def _content_bytes(page: Any) -> int:
    """The decompressed size of a page's content stream(s); pypdf keeps the decoded data, so
    text extraction does not decompress it again."""
    contents = page.get_contents()
    return 0 if contents is None else len(contents.get_data())


class _Budget:
    """The work one PDF may cost: content bytes read and CPU time, both checked as it goes.

    ``visit`` is pypdf's ``visitor_operand_before``: it sees every operator a page's text is read
    from (form XObjects' too, which page content does not count), and every ``CHECK_EVERY``
    operators it checks the CPU time.  pypdf swallows an exception raised inside a form XObject,
    so being over budget is remembered and raised again at the next operator or ``check``.
    """

    CHECK_EVERY = 1024

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.bytes = 0
        self.operators = 0
        self.started = time.thread_time()
        self.over: ValidationError | None = None

    def content(self, size: int) -> None:
        """Count a page's content before it is read; over ``MAX_DOCUMENT_CONTENT_BYTES``: refuse."""
        self.bytes += size
        if self.bytes > MAX_DOCUMENT_CONTENT_BYTES:
            raise ValidationError(
                f"{self.filename!r} has more than {MAX_DOCUMENT_CONTENT_BYTES} bytes of page "
                "content to read (decompressed, all pages together)",
                hint="split it into several documents, or upload its text",
            )

    def visit(self, *_: Any) -> None:
        self.operators += 1
        if self.over is not None or self.operators % self.CHECK_EVERY == 0:
            self.check()

    def check(self) -> None:
        """Raise once this thread has spent more than ``MAX_DOCUMENT_CPU_S`` on the document."""
        if self.over is None and time.thread_time() - self.started > MAX_DOCUMENT_CPU_S:
            self.over = ValidationError(
                f"reading {self.filename!r} took more than {MAX_DOCUMENT_CPU_S:g} s of CPU time",
                hint="split it into several documents, or upload its text",
            )
        if self.over is not None:
            raise self.over


def _quiet_pypdf() -> None:
    """Leave pypdf's warnings about damaged files unlogged, unless the application set the level
    of the ``pypdf`` logger itself."""
    pypdf_log = logging.getLogger("pypdf")
    if pypdf_log.level == logging.NOTSET:
        pypdf_log.setLevel(logging.ERROR)
