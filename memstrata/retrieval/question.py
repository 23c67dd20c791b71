"""Reading a question without a model: whose memory it asks about.

A question that names a person ("What does Melanie do to destress?") is answered by that
person's own words far more often than by anyone else's: on LoCoMo's development split, 96 % of
the evidence turns of questions naming one speaker are that speaker's.  ``subjects`` finds the
speakers of the searched cubes that a query names; search then ranks other speakers' items
lower (``retrieval.search``) and the context does not spend its budget on their replies
(``expand_chain``).  Names are the query's capitalised words (possessives stripped, two-word
names too) or, in an all-lower-case query, all its words; each is looked up among the cubes'
speakers in the store, so an ordinary word is a subject only when someone is called that.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from memstrata.store.base import SearchIndex
from memstrata.text import STOPWORDS

_WORD = re.compile(r"[^\W\d_][\w\-]*")
_POSSESSIVE = re.compile(r"['’]s\b")
#: Words looked up at most (a query is short; this bounds the lookups of a long one).
MAX_NAMES = 24


def names(query: str) -> list[str]:
    """The words of ``query`` that may name someone, then each two consecutive ones (for a
    two-word name), at most ``MAX_NAMES``."""
    words = _WORD.findall(_POSSESSIVE.sub("", query))
    if any(ch.isupper() for ch in query):
        words = [w for w in words if w[0].isupper()]
    words = [w for w in words if w.lower() not in STOPWORDS]
    pairs = [f"{a} {b}" for a, b in pairwise(words)]
    return list(dict.fromkeys(words + pairs))[:MAX_NAMES]


def subjects(store: SearchIndex, query: str, cube_ids: Sequence[str]) -> frozenset[str]:
    """The speakers of ``cube_ids`` that ``query`` names, spelt as stored (often empty)."""
    found = names(query)
    return frozenset(store.named_speakers(cube_ids, found)) if found else frozenset()
