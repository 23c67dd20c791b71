"""Limits and allowed ranges, defined once: the core enforces them, the surfaces derive from them.

The REST schemas, the MCP tool signatures and the client take their bounds from here (a test
checks that they agree), so a value one surface accepts is never refused by another.

The bounds on what a client sends are ones a real agent never meets; each refusal is a
``ValidationError`` (422) whose message names the bound.  ``check_text`` is the one rule for a
string a client may store or search with:

* every string must be encodable as UTF-8 (a lone surrogate such as ``"\\ud800"``, which JSON
  escapes can carry, is refused) and may not hold NUL;
* a *line* (an id, a name, a role, a label, a metadata key) holds no control character and no
  line or paragraph separator either, so it can never break the line it is shown on;
* a *text* (message content, a query, metadata values, a reason) keeps its newlines, tabs and
  every other character.
"""

from __future__ import annotations

import re

from memstrata.errors import ValidationError

#: Most hits a search returns, items a page lists, tasks a listing shows.
MAX_TOP_K = 1000
#: Most items a listing may skip (``offset``).
MAX_OFFSET = 2**31 - 1
#: Largest context budget, in tokens.
MAX_BUDGET = 1_000_000
#: Most events one audit call returns.
MAX_AUDIT_LIMIT = 10_000
#: Most tokens a chat answer may be asked to have.
MAX_CHAT_TOKENS = 8192
#: Longest label of an API key.
MAX_KEY_LABEL = 200
#: Longest a surface blocks waiting for background tasks, in seconds.
MAX_WAIT_S = 60.0
#: Most threads of an ``AsyncMemoryOS``'s pool (each may hold a database connection).
MAX_ASYNC_THREADS = 256

#: Most messages one ``add`` call stores.
MAX_MESSAGES = 1000
#: Longest message content, in characters (a turn, not a book: documents are chunked instead).
MAX_CONTENT_CHARS = 32_000
#: Most characters of content one ``add`` call stores, all its messages together (bounds the
#: embedding work of one request: the largest legal add took 377 s of the default embedder on two
#: busy cores; an add of more than ``HEAVY_ADD_CHARS`` is a heavy call, see ``MAX_HEAVY_CALLS``).
MAX_ADD_CHARS = 500_000
#: Longest query of search, context and chat, in characters.
MAX_QUERY_CHARS = 4000
#: Longest external id (the ``id`` a message is added with), in characters.
MAX_EXTERNAL_ID = 256
#: Longest id looked up (users, cubes, items, sessions are at most 128; see ``memory.access``).
MAX_ID_CHARS = 256
#: Longest role or speaker name of a message, in characters.
MAX_NAME = 128
#: Longest user name or cube name, in characters.
MAX_DISPLAY_NAME = 200
#: Longest reason given for a change (kept in the history and the audit), in characters.
MAX_REASON = 2000
#: Largest metadata object of an item, as compact UTF-8 JSON, in bytes.
MAX_METADATA_BYTES = 16_000
#: Deepest nesting of a metadata object (an object holding an object is depth 2).
MAX_METADATA_DEPTH = 16
#: Most metadata keys one search filter matches on.
MAX_FILTER_KEYS = 32
#: Most cube ids one call names.
MAX_CUBE_IDS = 1000
#: Longest file name of a document.
MAX_FILENAME = 255
#: Largest document, as uploaded (bytes) and as text (characters).  The text is counted while it
#: is made (JSON lines, PDF pages), and reading stops as soon as it passes the bound.
MAX_DOCUMENT_BYTES = 20_000_000
MAX_DOCUMENT_CHARS = 1_000_000
#: Most pages of a PDF document (a longer one is refused before any page is read).
MAX_DOCUMENT_PAGES = 2000
#: Most bytes of decompressed page content (the drawing operators text is read from) of a PDF,
#: all pages together; content shared by several pages counts once per page.  Reading content
#: is the costly part of a PDF (about a second of CPU per megabyte), drawn text or not.
MAX_DOCUMENT_CONTENT_BYTES = 50_000_000
#: Most CPU seconds reading one document's text may take (a PDF's, checked as it is read).
MAX_DOCUMENT_CPU_S = 60.0
#: Most values of a .json document (its commas and brackets are counted before it is parsed:
#: a parsed empty object takes some 70 bytes of memory, so this bounds the parse to ~100 MB).
MAX_JSON_VALUES = 1_000_000
#: Longest key path of a .json document's line (``a.b[3].c: value``), in characters; a longer
#: path is cut there and ends with "…".
MAX_JSON_PATH_CHARS = 1000
#: Most heavy calls one user runs at once in one process: document uploads, and adds of more than
#: ``HEAVY_ADD_CHARS`` characters; one more is ``Busy`` (429) until one of them ends.
MAX_HEAVY_CALLS = 2
#: Characters of content (all messages together) from which an ``add`` is a heavy call.
HEAVY_ADD_CHARS = 50_000
#: Most items one ``feedback`` call names (``item_ids``) or changes.
MAX_FEEDBACK_TARGETS = 20
#: Tool memory (``memory.tools``): most tool calls one message makes, tool definitions one
#: ``add`` passes (``tools=``), characters of a tool's result read (it is summarised, never
#: stored whole), characters of the summary kept, bytes of a call's arguments kept as JSON.
MAX_TOOL_CALLS = 64
MAX_TOOLS = 128
MAX_TOOL_RESULT_CHARS = 200_000
MAX_TOOL_SUMMARY_CHARS = 600
MAX_TOOL_ARGUMENTS_BYTES = 4000
#: Multimodal messages (``reader.parts``): most parts of one message's content, bytes of one
#: image kept as an artifact (decoded), characters of an image's or a file's address.
MAX_PARTS = 64
MAX_IMAGE_BYTES = 5_000_000
MAX_URL_CHARS = 2048
#: Skill memory (``memory.skills``): most steps a skill keeps, and most items of a task
#: (turns and tool calls of its session) a skill is distilled from.
MAX_SKILL_STEPS = 30
MAX_TASK_ITEMS = 1000
#: Earliest year of an event time: times are exchanged as ISO 8601, whose years have four digits.
MIN_EVENT_YEAR = 1000

# NUL and lone surrogates (which no UTF-8 encoder accepts) are refused in every string; a line
# also refuses the C0 and C1 controls, DEL and the Unicode line and paragraph separators.
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
_NOT_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def check_text(value: object, what: str, limit: int, *, line: bool = False) -> str:
    """``value`` when it is a string of at most ``limit`` characters that may be stored.

    A *text* may hold any character but NUL and lone surrogates; a ``line`` may hold no control
    character (tab and newline included) and no line or paragraph separator either.  Anything
    else is a ``ValidationError`` naming ``what``, the bound or the character and its place (the
    value itself is not echoed: it may be huge).  Emptiness is the caller's rule.
    """
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise ValidationError(
            f"{what} has {len(value)} characters; at most {limit} are allowed",
            hint="send less at once" if limit >= MAX_CONTENT_CHARS else None,
        )
    found = (_NOT_LINE if line else _NOT_TEXT).search(value)
    if found is not None:
        char = found.group()
        where = f"U+{ord(char):04X} at character {found.start()}"
        if "\ud800" <= char <= "\udfff":
            raise ValidationError(
                f"{what} holds a lone surrogate ({where}), which is not text",
                hint="send valid Unicode (UTF-8); a surrogate escape must be half of a pair",
            )
        if char == "\x00":
            raise ValidationError(f"{what} holds NUL ({where})", hint="remove the NUL character")
        raise ValidationError(
            f"{what} must be one line without control characters (found {where})",
            hint="remove line breaks, tabs and other control characters",
        )
    return value


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
