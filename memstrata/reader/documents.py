"""Documents: uploaded bytes → text → chunks with character spans (DESIGN §3, ``add(document)``).

``parse_document`` reads ``.txt``, ``.md``, ``.json`` and ``.pdf`` from bytes (never from a path a
client names).  ``chunk_text`` splits text into chunks of at most ``size`` characters that end at
paragraph breaks where they can, else at sentence ends, else at spaces; consecutive chunks share
up to ``overlap`` characters of whole sentences or paragraphs.  Each chunk's ``start``/``end`` is its
span in the parsed text, so ``text[start:end] == chunk.text``.

A document's text may have at most ``limits.MAX_DOCUMENT_CHARS`` characters (a PDF stops being
read past it).  pypdf's warnings about a damaged file ("EOF marker not found") are not logged:
a PDF that cannot be read is a ``ValidationError`` that says so, and one read despite damage
needs no warning.
"""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from memstrata.errors import ValidationError
from memstrata.limits import MAX_DOCUMENT_CHARS

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
        text = _pdf_text(filename, data)
    else:
        text = _decode(filename, data)
        if suffix == ".json":
            text = _json_text(filename, text)
    if len(text) > MAX_DOCUMENT_CHARS:
        raise _too_long(filename, len(text))
    if not text.strip():
        raise ValidationError(f"{filename!r} contains no text")
    return text


def _too_long(filename: str, size: int) -> ValidationError:
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
    """One ``path: value`` line per leaf, so every value is findable by its key."""
    try:
        value = json.loads(text)
        lines: list[str] = []
        _leaves(value, "", lines)
    except RecursionError as exc:
        raise ValidationError(f"{filename!r} is JSON nested too deeply to read") from exc
    except ValueError as exc:
        raise ValidationError(f"{filename!r} is not valid JSON: {exc}") from exc
    return "\n".join(lines)


def _leaves(value: Any, path: str, lines: list[str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _leaves(inner, f"{path}.{key}" if path else str(key), lines)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            _leaves(inner, f"{path}[{i}]", lines)
    elif value is not None:
        lines.append(f"{path}: {value}" if path else str(value))


def _pdf_text(filename: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    if b"%PDF-" not in data[:1024]:
        raise ValidationError(f"{filename!r} is not a PDF (it has no %PDF- header)")
    _quiet_pypdf()
    pages: list[str] = []
    size = 0
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValidationError(f"{filename!r} is an encrypted PDF", hint="upload it unlocked")
        for page in reader.pages:
            pages.append((page.extract_text() or "").strip())
            size += len(pages[-1]) + 2
            if size > MAX_DOCUMENT_CHARS:
                raise _too_long(filename, size)
    except ValidationError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise ValidationError(f"{filename!r} is not a readable PDF: {exc}") from exc
    return "\n\n".join(p for p in pages if p)


def _quiet_pypdf() -> None:
    """Leave pypdf's warnings about damaged files unlogged, unless the application set the level
    of the ``pypdf`` logger itself."""
    pypdf_log = logging.getLogger("pypdf")
    if pypdf_log.level == logging.NOTSET:
        pypdf_log.setLevel(logging.ERROR)
