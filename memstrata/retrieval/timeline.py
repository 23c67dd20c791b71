"""Ranking that knows time, and weighs chatter less (docs/search.md, step 7).

A memory that stopped holding (``valid_to`` set: the long tier superseded it, or a turn whose
statement was superseded, ``tiers.long``) answers a question about the **present** ("Where does
Ann live?", "What is Ben's job now?") worse than what replaced it, and one about the **past**
("Where did Ann live before?", "used to", "previously") better.  ``tense`` reads which a
question asks (no model: a few words and the verb's tense); ``weigh`` moves the scores:

* present: an item that stopped holding is multiplied by ``PAST_IN_PRESENT``, and the turns
  stating what replaced it take its score when theirs is lower (fetched when they were not
  candidates): the newest statement ranks above the one it replaced;
* past: an item that stopped holding is multiplied by ``PAST_IN_PAST`` (> 1);
* neither: an item that stopped holding by ``PAST_IN_NEUTRAL`` (1: not weighed).

Chatter: a turn that is only greetings and pleasantries ("How was your weekend?", "Good
morning!", "Thanks!") is multiplied by ``SMALL_TALK`` (``small_talk``; a turn that asks about
something, even beside a greeting, by ``QUESTION``, 1: its answer follows it), and so is a
segment whose pages were all small talk (``metadata["small_talk"]``, written by the mid tier):
neither answers a question, and both share its everyday words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Literal

from memstrata.filters import Filters
from memstrata.model import Hit, MemoryItem
from memstrata.retrieval.explain import adjusted, joined, scaled
from memstrata.store.base import SearchIndex

Tense = Literal["present", "past"] | None
#: No filter: every item may be lifted in.
EVERYTHING = Filters()

#: Factor on an item that stopped holding, for a question about the present.
PAST_IN_PRESENT = 0.4
#: Factor on an item that stopped holding, for a question about the past.
PAST_IN_PAST = 1.5
#: Factor on an item that stopped holding, for a question that says neither: none, since
#: such a question ("When did Ann move?") may be about any time (LoCoMo dev: 430 of 760).
PAST_IN_NEUTRAL = 1.0
#: Factor on a turn or segment that is only small talk (greetings, pleasantries).
SMALL_TALK = 0.5
#: Factor on a turn that asks about something ("What got you into running?"): none.  Between
#: two people a question sets the topic its answer takes up, and is often part of the
#: evidence (at 0.8 LoCoMo dev lost questions whose evidence was such a turn); only
#: pleasantries are chatter.
QUESTION = 1.0
#: A sentence starting like a pleasantry is one up to this many words ("Thanks so much!");
#: a longer one says something more.
PLEASANTRY_WORDS = 6

_PAST = re.compile(
    r"\b(?:before|used to|use to|previously|formerly|former|originally|at first|back then|in the past|"
    r"prior to|earlier|anymore|any more|no longer|old)\b",
    re.I,
)
_PRESENT = re.compile(
    r"\b(?:now|currently|current|these days|nowadays|at the moment|today|still|latest|new)\b|"
    r"^\s*(?:\w+\s+){0,3}?(?:does|do|is|are|has|have)\b",
    re.I,
)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_PLEASANTRY = re.compile(
    r"^\W*(?:hi|hello|hey|yo|good (?:morning|afternoon|evening|night)|morning|thanks?(?: you)?|"
    r"thank you(?: so much)?|wow|ugh|lol|haha|"
    r"bye|see you|take care|cheers|congrats|congratulations|welcome|you're welcome|"
    r"how are you|how's it going|what's up|how was your (?:day|weekend|week|trip)|"
    r"same here|me too|sounds (?:good|great|fun|nice)|that's (?:great|nice|cool|awesome)|"
    r"i'm (?:so )?tired|long day|mondays|(?:that )?sounds like|glad to hear|good to hear|"
    r"nice to hear|happy to help|hang in there|get some rest|stay (?:dry|safe|warm)|enjoy|"
    r"good luck|have fun|i'm (?:doing )?(?:well|good|fine)|not bad|i see|got it|"
    r"i'll remember that|thanks for (?:telling|sharing|asking))\b",
    re.I,
)


def tense(query: str) -> Tense:
    """Whether ``query`` asks about the past, the present, or says neither (None)."""
    if _PAST.search(query):
        return "past"
    if _PRESENT.search(query):
        return "present"
    return None


def small_talk(text: str) -> bool:
    """Whether ``text`` is only questions, greetings and pleasantries: each sentence ends in
    "?" or starts with a greeting or a pleasantry of at most six words."""
    said = [s.strip() for s in _SENTENCE.findall(text) if s.strip(" .!?,")]
    if not said:
        return True
    return all(s.endswith("?") or _pleasantry(s) for s in said)


def _pleasantry(sentence: str) -> bool:
    """Whether ``sentence`` is a greeting or a pleasantry ("How was your weekend?"): it starts
    like one and has at most ``PLEASANTRY_WORDS`` words."""
    return _PLEASANTRY.match(sentence) is not None and len(sentence.split()) <= PLEASANTRY_WORDS


#: The reason recorded with a ``time`` part, per tense asked.
_STOPPED = {"present": "no longer holds (present question)",
            "past": "no longer holds (past question)", None: "no longer holds"}  # fmt: skip


def weigh(
    store: SearchIndex,
    hits: Sequence[Hit],
    asked: Tense,
    filters: Filters = EVERYTHING,
    places: Mapping[str, int] | None = None,
) -> list[Hit]:
    """``hits`` re-weighed by time and chatter (see the module docs), best first; a turn
    lifted in joins them only when it passes ``filters``.

    Each weight is a part of the hit: ``time`` (factor ``PAST_IN_…``, "no longer holds
    (present question)"), ``chatter`` ("small talk"), ``successor`` ("states what replaced #N",
    N the superseded hit's place in ``places``, the fused list, or its id when it has none).
    """
    factor = {"present": PAST_IN_PRESENT, "past": PAST_IN_PAST, None: PAST_IN_NEUTRAL}[asked]
    out: dict[str, Hit] = {}
    for hit in hits:
        if hit.item.valid_to is not None and factor != 1.0:
            hit = scaled(hit, "time", factor, _STOPPED[asked])
        chatter = _chatter(hit.item)
        if chatter != 1.0:
            hit = scaled(hit, "chatter", chatter, "small talk")
        out[hit.item.id] = hit
    if asked == "present":
        _lift_successors(store, hits, out, filters, places or {})
    return sorted(out.values(), key=lambda h: -h.score)


def _chatter(item: MemoryItem) -> float:
    """``SMALL_TALK`` for small talk, ``QUESTION`` for a turn that only asks, else 1."""
    if item.type == "segment":
        return SMALL_TALK if item.metadata.get("small_talk") is True else 1.0
    return _turn_chatter(item.text) if item.type == "turn" else 1.0


@lru_cache(maxsize=4096)
def _turn_chatter(text: str) -> float:
    """``_chatter`` of a turn saying ``text`` (a pure function of the text), read once per
    distinct text: most of a search's candidates were candidates of the searches before it."""
    if not small_talk(text):
        return 1.0
    said = [s.strip() for s in _SENTENCE.findall(text) if s.strip(" .!?,")]
    # a question beside a greeting ("Wow! What got you into running?") still asks about
    # something: it is weighed as a question, not as chatter
    asks = any(s.endswith("?") and not _pleasantry(s) for s in said)
    return QUESTION if asks else SMALL_TALK


def _lift_successors(
    store: SearchIndex,
    hits: Sequence[Hit],
    out: dict[str, Hit],
    filters: Filters,
    places: Mapping[str, int],
) -> None:
    """Give the turns stating what replaced a superseded hit that hit's score (unweighed),
    when theirs is lower: a question about the present is answered by the newest statement."""
    # per successor: the best superseded hit's score, and that hit's id
    wanted: dict[str, tuple[float, str]] = {}
    for hit in hits:
        successor = hit.item.metadata.get("superseded_by") if hit.item.valid_to else None
        if isinstance(successor, str) and hit.score > wanted.get(successor, _NONE)[0]:
            wanted[successor] = (hit.score, hit.item.id)
    if not wanted:
        return
    # what replaced an item, and the turns it cites, are of that item's cube
    cubes = list(dict.fromkeys(hit.item.cube_id for hit in hits))
    successors = store.get_items(list(wanted), cubes)
    # a successor may be the turn itself (a change said with no new value) or an item
    # citing the turns that state the new value
    turns: dict[str, tuple[float, str]] = {}
    for item in successors:
        ids = [item.id] if item.type == "turn" else [s.item_id for s in item.sources if s.item_id]
        for turn_id in ids:
            if wanted[item.id][0] > turns.get(turn_id, _NONE)[0]:
                turns[turn_id] = wanted[item.id]
    missing = [i for i in turns if i not in out]
    found = {i.id: i for i in store.get_items(missing, cubes)} if missing else {}
    for turn_id, (score, replaced) in turns.items():
        known = out.get(turn_id)
        place = places.get(replaced)
        reason = f"states what replaced {f'#{place}' if place is not None else replaced}"
        if known is not None:
            if known.item.valid_to is None and known.score < score:
                out[turn_id] = adjusted(known, "successor", score, reason)
        elif (
            turn_id in found and found[turn_id].valid_to is None and filters.matches(found[turn_id])
        ):
            out[turn_id] = joined(found[turn_id], "successor", score, reason)


#: No superseded hit yet: any score beats it.
_NONE = (0.0, "")
