"""Text for the keyword channel and for prompts: what is indexed, how a query becomes a match
expression, what is embedded, and stored text made safe to show on one line (``one_line``).

Every indexed term carries its cube's prefix (six letters derived from the cube id), so a
term's postings are one cube's: a search touches only the searched cubes' postings, however
many other tenants share the file (a cube column ANDed into the query cost 3–10× more).

FTS5's ``unicode61`` tokenizer splits on spaces and punctuation, which leaves a run of Chinese or
Japanese characters as one unsearchable token.  So before indexing, every CJK run is rewritten as
its single characters plus its overlapping character bigrams ("喜欢吃" → "喜 欢 吃 喜欢 欢吃"); a
query's CJK runs become bigrams (a lone character stays a unigram).  Any two-or-more character CJK
word is thus findable, which FTS5's trigram tokenizer cannot do for two-character words.
"""

from __future__ import annotations

import hashlib
import math
import re

from memstrata.model import MemoryItem

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Control characters that str.split() does not take for whitespace (NUL, ESC…): shown as spaces.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+|[{_CJK}]+")

#: Common English function words: dropped from queries (they only add noise and cost to BM25).
STOPWORDS = frozenset(
    """a an and are as at be been but by did do does for from had has have he her hers him his how
    i if in into is it its me my of on or our she so than that the their them then there these
    they this those to too us was we were what when where which who whom why will with would you
    your""".split()
)


def _cjk_grams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def index_text(text: str) -> str:
    """The body written to the full-text index for ``text``."""

    def expand(match: re.Match[str]) -> str:
        run = match.group(0)
        grams = list(run) + (_cjk_grams(run) if len(run) > 1 else [])
        return " " + " ".join(grams) + " "

    return _CJK_RUN.sub(expand, text)


def terms(text: str) -> list[str]:
    """Every term of ``text`` in order, lower-cased (CJK runs as bigrams), repeats kept."""
    found: list[str] = []
    for token in _WORD.findall(text.lower()):
        found.extend(_cjk_grams(token) if _CJK_RUN.fullmatch(token) else [token])
    return found


def query_terms(query: str) -> list[str]:
    """The distinct terms of ``query``, lower-cased; stopwords and lone Latin letters are dropped
    unless nothing else is left."""
    unique = list(dict.fromkeys(terms(query)))
    # A lone Latin letter is the "s" of "Maya's" or the "t" of "don't": noise, like a stopword.
    content = [
        t
        for t in unique
        if t not in STOPWORDS and not (len(t) == 1 and t.isascii() and t.isalpha())
    ]
    return content or unique


def phrase(text: str) -> str:
    """``text`` as one quoted FTS5 phrase (never parsed as query syntax)."""
    return '"' + text.replace('"', '""') + '"'


def any_of(phrases: list[str]) -> str:
    """An FTS5 expression matching any of ``phrases``."""
    return "(" + " OR ".join(map(phrase, phrases)) + ")"


def cube_prefix(cube_id: str) -> str:
    """Six lower-case letters standing for a cube in the full-text index.

    Letters only, so a prefixed word is still one plain token for the tokenizer and stemmer.
    Two cubes may share a prefix (about one chance in 300 million per pair): that only costs
    speed, since matches are checked against the cube column afterwards.
    """
    value = int.from_bytes(hashlib.blake2b(cube_id.encode(), digest_size=8).digest(), "big")
    letters = []
    for _ in range(6):
        value, digit = divmod(value, 26)
        letters.append(chr(ord("a") + digit))
    return "".join(letters)


def index_body(text: str, cube_id: str) -> str:
    """The full-text body for ``text`` in a cube: its terms (CJK as characters and bigrams),
    each with the cube's prefix."""
    prefix = cube_prefix(cube_id)
    return " ".join(prefix + token for token in _WORD.findall(index_text(text)))


def embedding_text(item: MemoryItem) -> str:
    """What is embedded for an item: its text, prefixed by the speaker when there is one.

    The speaker matters to questions such as "What did Caroline paint?", so it is part of the
    vector; it is not part of ``text``, which stays exactly what the caller said.
    """
    return f"{item.speaker}: {item.text}" if item.speaker else item.text


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line: every run of whitespace, line breaks (``\\n``, ``\\r``, U+2028…) and
    control characters becomes one space, the ends are trimmed, and past ``limit`` characters it
    is cut with "…".  Stored text shown in a prompt goes through this, so it never starts a line
    of its own."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    if limit is not None and len(flat) > limit:
        return flat[: limit - 1].rstrip() + "…"
    return flat


#: A word counts once per this many characters (rounded up) in ``count_tokens``.
WORD_CHARS = 12


def count_tokens(text: str) -> int:
    """Offline token estimate: words × 1.3, rounded up; a word counts once per ``WORD_CHARS``
    characters (contexts are packed and prompts batched by it)."""
    words = sum(-(-len(word) // WORD_CHARS) for word in text.split())
    return math.ceil(words * 1.3)
