"""The offline reader: rules, extractive text and one small learned model; no LLM.

Keywords and extractive summaries for the mid tier; for the long tier, facts (each a sentence
written as a note, ``reader.notes``, kept when ``reader.worthiness`` says it is worth it),
profile attributes, preferences and assistant knowledge (``reader.rules``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from memstrata.embed.base import Embedder, fingerprint
from memstrata.model import MemoryItem
from memstrata.reader import notes
from memstrata.reader.findings import Finding
from memstrata.reader.rules import read_page
from memstrata.reader.worthiness import Worthiness, cheap_features, shipped
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


def summarise(pages: Sequence[MemoryItem], max_sentences: int = 4) -> str:
    """An extractive summary of a run of pages: from each of the first and last pages (two and
    two), its first sentence that says something (not chatter, ``notes.candidates``) written as
    a note: whose it is named, the first and second person resolved, relative dates dated
    ("Caroline went to a support group yesterday (7 May 2023)."); a page that says nothing is
    left out.  When no page says anything, the first sentence of the first page."""
    if len(pages) <= max_sentences:
        chosen = list(pages)
    else:
        half = max_sentences // 2
        chosen = [*pages[:half], *pages[-(max_sentences - half) :]]
    listeners = _listeners(chosen)
    lines = [
        next((note for _, note in _notes_of(page, listeners.get(page.id))), None) for page in chosen
    ]
    said = [line for line in lines if line]
    return " / ".join(said) if said else first_sentence(chosen[0].text) if chosen else ""


class OfflineReader:
    """The default reader: notes chosen by the worthiness model, and rules; no LLM, no network.

    With ``embedder`` (the cube's) the notes are embedded here, once: the worthiness model of
    that embedder reads the vectors, and the long tier stores them with the facts.
    """

    name = "offline"

    def __init__(self, embedder: Embedder | None = None, model: Worthiness | None = None) -> None:
        self.embedder = embedder
        self.model = model

    def read(self, pages: Sequence[MemoryItem]) -> list[Finding]:
        """Findings of every page, in page order; each cites its page."""
        facts: dict[str, list[Finding]] = {}
        for fact in self._worthy(self.candidate_notes(pages)):
            facts.setdefault(fact.sources[0], []).append(fact)
        return [f for page in pages for f in [*read_page(page), *facts.get(page.id, [])]]

    def candidate_notes(self, pages: Sequence[MemoryItem]) -> list[tuple[MemoryItem, str, str]]:
        """Every (page, sentence, note) the pages could give, in page order."""
        listeners = _listeners(pages)
        written = []
        for page in pages:
            if page.role == "assistant":
                continue  # what the assistant commits to is knowledge (reader.rules)
            written += [(page, s, n) for s, n in _notes_of(page, listeners.get(page.id))]
        return written

    def _worthy(self, written: list[tuple[MemoryItem, str, str]]) -> list[Finding]:
        """The notes the worthiness model keeps, as facts (with their vectors, if embedded)."""
        if not written:
            return []
        worthiness = self.model or shipped()
        model = worthiness.model_for(fingerprint(self.embedder) if self.embedder else None)
        features = np.array([cheap_features(s, n) for _, s, n in written], np.float64)
        vectors = None
        if self.embedder is not None:
            vectors = self.embedder.embed_passages([n for _, _, n in written])
            if model.embedder is not None:
                features = np.hstack([features, vectors.astype(np.float64)])
        # A note's peers: its speaker's other notes of the same session, read together.
        peers = [(page.session_id, _who(page)) for page, _, _ in written]
        chances = model.chances(features, peers)
        return [
            Finding(
                type="fact",
                text=note,
                subject=_who(page),
                sources=(page.id,),
                confidence=round(float(chance), 3),
                vector=None if vectors is None else vectors[i],
            )
            for i, ((page, _, note), chance) in enumerate(zip(written, chances, strict=True))
            if chance >= model.threshold
        ]


def _notes_of(page: MemoryItem, listener: str | None) -> Iterator[tuple[str, str]]:
    """(sentence, note) for each sentence of ``page`` that says something and can be written
    as a note (``reader.notes``), spoken to ``listener`` when known."""
    who = _who(page)
    for sentence in notes.candidates(page.text, (who, listener) if listener else (who,)):
        if (note := notes.write(sentence, who, listener, page.event_time)) is not None:
            yield sentence, note


def _who(page: MemoryItem) -> str:
    return page.speaker or page.role or "user"


def _listeners(pages: Sequence[MemoryItem]) -> dict[str, str]:
    """Who each page speaks to, where the pages tell: the one other speaker of its session;
    the assistant for a user talking with an assistant, and the user for the assistant."""
    speakers: dict[str | None, set[str]] = {}
    for page in pages:
        speakers.setdefault(page.session_id, set()).add(_who(page))
    listeners = {}
    for page in pages:
        others = speakers[page.session_id] - {_who(page)}
        if len(others) == 1:
            listeners[page.id] = others.pop()
    return listeners
