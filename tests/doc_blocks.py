"""The fenced code blocks of README.md and docs/**/*.md, and the ``doc-test`` markers that say how
tests/test_doc_blocks.py runs each (the vocabulary is in that module's docstring).

A marker is one HTML comment on the line right before a block's opening fence (indented like it
when the block is inside a list item)::

    <!-- doc-test: server twice -->
    <!-- doc-test: data (LoCoMo is not in the repository; a run takes an hour) -->

Nothing here runs a block: this module only reads the pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the languages whose blocks are run (or, when marked, syntax-checked)
SHELL = frozenset({"sh", "bash"})
RUN_LANGUAGES = SHELL | {"python"}

#: how a block runs: with the page's server; a second time in the same place
RUN_WORDS = frozenset({"server", "twice"})
#: why a block is not run: each needs its reason in parentheses
NOT_RUN_WORDS = frozenset({"install", "data", "fragment", "skip"})

FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w+-]*)[ \t]*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:(?P<body>.*?)-->\s*$")
MARKER_BODY = re.compile(r"^\s*(?P<words>[a-z ]*?)\s*(?:\((?P<reason>.*)\))?\s*$")
#: a first line that is a command someone would type, or a Python import: a block with no
#: language that starts so must say it (``sh``, ``python``) to be run or marked, not passed over
#: as prose; a ``text`` block may show a command's synopsis, but not Python
COMMAND_START = re.compile(
    r"^(memstrata|curl|python3?|pip|export|mkdir|cd|docker|uvicorn|\.venv/bin/\S+)(\s|$)"
)
PYTHON_START = re.compile(r"^(from \S+ import |import \S+)")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), the line of its opening fence
    (1-based), its language, its text (the fence's indent removed) and its marker, if any."""

    page: str
    line: int
    lang: str
    code: str
    words: tuple[str, ...] = ()
    reason: str | None = None
    marker: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def not_run(self) -> str | None:
        """The word saying why the block is not run (``install``, ``data`` …), or None."""
        return next((w for w in self.words if w in NOT_RUN_WORDS), None)

    @property
    def server(self) -> bool:
        return "server" in self.words

    @property
    def runs(self) -> int:
        """How many times the block is run: 0 (marked), 1, or 2 (``twice``)."""
        return 0 if self.not_run else 2 if "twice" in self.words else 1


def pages() -> list[Path]:
    """README.md, then every page under docs/ in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> list[Block]:
    """Every fenced block of every page, in page order."""
    return [block for page in pages() for block in _page_blocks(page)]


def runnable() -> list[Block]:
    """The blocks in a language that is run: shell and Python."""
    return [block for block in blocks() if block.lang in RUN_LANGUAGES]


def _page_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = len(opening["indent"])
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        marker = lines[index - 1] if index and MARKER.match(lines[index - 1]) else None
        words, reason = _parse(marker)
        found.append(
            Block(page, index + 1, opening["lang"], code, words, reason, marker and marker.strip())
        )
        index = end + 1
    return found


def _parse(marker: str | None) -> tuple[tuple[str, ...], str | None]:
    """A marker's words and reason; an unreadable body gives the word ``?`` (an error)."""
    if marker is None:
        return (), None
    matched = MARKER.match(marker)
    body = MARKER_BODY.match(matched["body"]) if matched else None
    if body is None:
        return ("?",), None
    reason = body["reason"].strip() if body["reason"] is not None else None
    return tuple(body["words"].split()), reason


def marker_errors(block: Block) -> list[str]:
    """What is wrong with a block's marker (or with its lack of one); empty when nothing."""
    errors: list[str] = []
    known = RUN_WORDS | NOT_RUN_WORDS
    errors += [
        f"unknown word {w!r} (known: {sorted(known)})" for w in block.words if w not in known
    ]
    not_run = [w for w in block.words if w in NOT_RUN_WORDS]
    if len(not_run) > 1 or (not_run and set(block.words) & RUN_WORDS):
        errors.append(f"{' and '.join(block.words)}: a block is run or not, once")
    if not_run and not block.reason:
        errors.append(f"'{not_run[0]}' needs its reason in parentheses")
    if block.reason is not None and not not_run:
        errors.append("a reason is for a block that is not run")
    if block.marker and block.lang not in RUN_LANGUAGES:
        errors.append(f"a marker before a {block.lang or 'plain'} block, which is never run")
    first = next((ln for ln in block.code.splitlines() if ln and not ln.startswith("#")), "")
    if block.lang in ("", "text") and PYTHON_START.match(first):
        errors.append(f"{first!r} is Python: tag the block python (then run or mark it)")
    if block.lang == "" and COMMAND_START.match(first):
        errors.append(f"{first!r} is a command: tag the block sh (then run or mark it), or text")
    return [f"{block.id}: {error}" for error in errors]
