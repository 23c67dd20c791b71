"""The offline reader: rules and extractive text, no model (DESIGN §3.5).

Keywords and extractive summaries for the mid tier; facts, profile attributes, preferences and
assistant knowledge for the long tier (the rules are in ``reader.rules``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from memstrata.model import MemoryItem
from memstrata.reader.findings import Finding
from memstrata.reader.rules import read_page
from memstrata.text import STOPWORDS, terms

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
#: Words too common in conversation to tell topics apart, beyond the search stopwords.
_CHATTER = frozenset(
    """about also just like really yeah yes yep okay ok thanks thank hey hi hello wow oh
    so very much that's it's i'm you're i've don't can't what's there's going know think get got
    one can could should lot things thing good great nice sure well""".split()
)


def keywords(text: str, limit: int = 8) -> list[str]:
    """Up to ``limit`` content words of ``text`` (lower-cased), most frequent first.

    Latin words need three letters or more; CJK text contributes character bigrams.
    """
    counts = Counter(
        t
        for t in terms(text)
        if t not in STOPWORDS and t not in _CHATTER and (len(t) >= 3 or not t.isascii())
    )
    return [word for word, _ in counts.most_common(limit)]


def merge_keywords(counts: dict[str, int], new: Iterable[str], limit: int) -> list[str]:
    """Add ``new`` to running ``counts`` (in place); the ``limit`` most frequent, ties by age."""
    for word in new:
        counts[word] = counts.get(word, 0) + 1
    ranked = sorted(counts, key=lambda w: -counts[w])
    return ranked[:limit]


def first_sentence(text: str, max_words: int = 25) -> str:
    """The first sentence of ``text``, cut to ``max_words`` words."""
    sentence = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    words = sentence.split()
    return " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")


def summarise(texts: Sequence[str], max_sentences: int = 4) -> str:
    """An extractive summary: the first sentence of the first and last pages of a run."""
    if len(texts) <= max_sentences:
        chosen = list(texts)
    else:
        half = max_sentences // 2
        chosen = [*texts[:half], *texts[-(max_sentences - half) :]]
    return " / ".join(first_sentence(t) for t in chosen)


class OfflineReader:
    """The default reader: rules over each page (``reader.rules``); no model, no network."""

    name = "offline"

    def read(self, pages: Sequence[MemoryItem]) -> list[Finding]:
        """Findings of every page, in page order; each cites its page."""
        return [finding for page in pages for finding in read_page(page)]
