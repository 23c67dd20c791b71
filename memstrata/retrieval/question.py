"""Reading a question without a model: whose memory it asks about, and when.

A question that names a person ("What does Melanie do to destress?") is answered by that
person's own words far more often than by anyone else's: on LoCoMo's development split, 96 % of
the evidence turns of questions naming one speaker are that speaker's
(``bench/locomo_reading.py``). ``subjects`` finds the speakers of the searched cubes that a
query names; search then ranks other speakers' items lower (``retrieval.search``), its dense
channel embeds the question as its subject would ask it, in the first person (``as_speakers``), and the
context does not spend its budget on the others' replies (``expand_chain``). Names are the
query's capitalised words (possessives stripped, two-word names too) or, when no word but the
first is capitalised, all its words; each is looked up among the cubes' speakers in the store,
so an ordinary word is a subject only when someone is called that.

A question that gives a calendar date ("What did Nate do for Joanna on 25 May, 2022?") asks
about what happened then: ``dates`` reads such dates ("25 May, 2022", "May 25th 2022",
"2022-05-25"), and search raises items within a day of one (``near``).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from itertools import pairwise

from memstrata.limits import MIN_EVENT_YEAR
from memstrata.model import MemoryItem
from memstrata.store.base import SearchIndex
from memstrata.text import STOPWORDS

_WORD = re.compile(r"[^\W\d_][\w\-]*")
_POSSESSIVE = re.compile(r"['’]s\b")
_MONTHS = ("january february march april may june july august september october november "
           "december").split()  # fmt: skip
_MONTH = "|".join(_MONTHS)
_DAY_MONTH_YEAR = re.compile(
    rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m>{_MONTH}),?\s+(?P<y>\d{{4}})\b", re.IGNORECASE
)
_MONTH_DAY_YEAR = re.compile(
    rf"\b(?P<m>{_MONTH})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})\b", re.IGNORECASE
)
_ISO = re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b")
#: How many days from a date the query names an item still counts as then (time zones, and
#: "yesterday" told the next day).
DATE_DAYS = 1
#: Dates read at most (a question names one or two; this bounds the work of a long query).
MAX_DATES = 8
#: Words looked up at most (a query is short; this bounds the lookups of a long one).
MAX_NAMES = 24


def names(query: str) -> list[str]:
    """The words of ``query`` that may name someone, then each two consecutive ones (for a
    two-word name), at most ``MAX_NAMES``."""
    words = _WORD.findall(_POSSESSIVE.sub("", query))
    # Capitals past the first word mark the names; a capital that only starts the sentence
    # ("What does melanie like?") says nothing, so then every word may be one.
    if any(w[0].isupper() for w in words[1:]):
        words = [w for w in words if w[0].isupper()]
    words = [w for w in words if w.lower() not in STOPWORDS]
    pairs = [f"{a} {b}" for a, b in pairwise(words)]
    return list(dict.fromkeys(words + pairs))[:MAX_NAMES]


def subjects(store: SearchIndex, query: str, cube_ids: Sequence[str]) -> frozenset[str]:
    """The speakers of ``cube_ids`` that ``query`` names, spelt as stored (often empty)."""
    found = names(query)
    return frozenset(store.named_speakers(cube_ids, found)) if found else frozenset()


#: A verb made to agree with the pronoun a subject became ("does I" → "do I"; "is you" → "are you").
_AGREE = {
    "I": {"does": "do", "is": "am", "has": "have", "was": "was"},
    "you": {"does": "do", "is": "are", "has": "have", "was": "were"},
}
_VERB = re.compile(r"\b((?i:does|is|has|was)) (I|you)\b|\b(I|you) (does|is|has|was)\b")


def as_speakers(query: str, speakers: frozenset[str]) -> str:
    """``query`` as its subjects would say it: the first of ``speakers`` it names said as "I"
    ("my" for a possessive), any other as "you" ("your"), with "does", "is", "has" and "was"
    agreeing ("Where does Alice live?" → "Where do I live?"): what the dense channel embeds
    once the subjects are known.

    A speaker's turns are embedded as ``speaker: text`` and said in the first person ("Alice:
    I moved to Lisbon"); a question about them in the third person ("they") is far from them in
    the embedding, one in the first person close.  The subject itself is taken care of by the
    speaker factor.  A query that is nothing but names is kept whole.
    """
    found = []
    for name in speakers:
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE)
        if match:
            found.append((match.start(), -len(name), name))
    said = query
    for n, (_, _, name) in enumerate(sorted(found)):
        pronoun, possessive = ("I", "my") if n == 0 else ("you", "your")
        pattern = re.compile(rf"(?<!\w){re.escape(name)}(['’]s\b)?(?!\w)", re.IGNORECASE)
        said = pattern.sub(_said_as(pronoun, possessive), said)
    rest = [w for w in _WORD.findall(said) if w.lower() not in STOPWORDS | _SAID_AS]
    return _VERB.sub(_agree, said) if rest else query


_SAID_AS = frozenset({"i", "my", "you", "your"})


def _said_as(pronoun: str, possessive: str) -> Callable[[re.Match[str]], str]:
    """A replacement saying a name as ``pronoun``, or ``possessive`` when it has "'s"."""

    def said(match: re.Match[str]) -> str:
        return possessive if match.group(1) else pronoun

    return said


def _agree(match: re.Match[str]) -> str:
    """A verb and its new pronoun, in agreement."""
    verb, pronoun = match.group(1), match.group(2)
    if verb:
        agreed = _AGREE[pronoun][verb.lower()]
        return f"{agreed.capitalize() if verb[0].isupper() else agreed} {pronoun}"
    return f"{match.group(3)} {_AGREE[match.group(3)][match.group(4)]}"


def dates(query: str) -> list[date]:
    """The calendar dates ``query`` names, in order, at most ``MAX_DATES`` (impossible ones,
    like 31 February, and those before the year ``MIN_EVENT_YEAR``, when no event can be,
    are skipped)."""
    found: list[tuple[int, date]] = []
    for pattern in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _ISO):
        for m in pattern.finditer(query):
            month = m["m"]
            number = int(month) if month.isdigit() else _MONTHS.index(month.lower()) + 1
            if int(m["y"]) < MIN_EVENT_YEAR:
                continue
            try:
                found.append((m.start(), date(int(m["y"]), number, int(m["d"]))))
            except ValueError:
                continue
    return list(dict.fromkeys(d for _, d in sorted(found)))[:MAX_DATES]


_MONTH_YEAR = re.compile(rf"\b(?P<m>{_MONTH}),?\s+(?P<y>\d{{4}})\b", re.IGNORECASE)


def periods(query: str) -> list[tuple[date, date]]:
    """The spans of days ``query`` names, first and last day: each date it names, within
    ``DATE_DAYS`` (``dates``), and each month it names with a year and no day ("in July 2022":
    the month, with ``DATE_DAYS`` either side).  A span stops at the calendar's ends
    ("31 December 9999" is a day like any other, not an overflow)."""
    found = [_widened(day, day) for day in dates(query)]
    dated = [m.span() for p in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR) for m in p.finditer(query)]
    for m in _MONTH_YEAR.finditer(query):
        if any(start <= m.start() < end for start, end in dated):
            continue  # the month of a full date ("25 May, 2022")
        year, number = int(m["y"]), _MONTHS.index(m["m"].lower()) + 1
        if year < MIN_EVENT_YEAR:
            continue
        days = calendar.monthrange(year, number)[1]
        found.append(_widened(date(year, number, 1), date(year, number, days)))
    return list(dict.fromkeys(found))[:MAX_DATES]


def _widened(first: date, last: date) -> tuple[date, date]:
    """``first`` to ``last`` with ``DATE_DAYS`` either side, within ``date.min``..``date.max``."""
    slack = timedelta(days=DATE_DAYS)
    return max(first, date.min + slack) - slack, min(last, date.max - slack) + slack


def near(item: MemoryItem, days: Sequence[date]) -> bool:
    """Whether ``item`` happened within ``DATE_DAYS`` of one of ``days`` (by its event time)."""
    when = item.event_time.date()
    return any(abs(when - day) <= timedelta(days=DATE_DAYS) for day in days)
