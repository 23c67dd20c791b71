"""Writing a turn's sentences as notes a careful reader would keep.

A note is one sentence of a turn, rewritten so that it reads correctly out of its conversation:

* chatter is dropped: questions, greetings, thanks and pure reactions ("Wow, that's cool!");
* leading interjections, vocatives ("…, Caroline!") and intensifiers ("so", "really") go;
* the first person becomes the speaker ("I love my dog" → "Mel loves Mel's dog"), with the
  commonest verbs made to agree, and the second person becomes the one spoken to;
* relative dates are dated from the turn's time ("yesterday" → "yesterday (7 May 2023)").

Which notes are worth keeping is decided by ``reader.worthiness``; this module only writes them.
"""

from __future__ import annotations

import re
from calendar import month_name
from collections.abc import Iterator
from datetime import datetime, timedelta

from memstrata.text import STOPWORDS

#: Attached to a turn's text by importers that keep image captions; not the speaker's words.
_CAPTION = re.compile(r"\s*\[shared an image:[^\]]*\]\s*")
_GREETING = re.compile(
    r"^(?:hey|hi|hello|hiya|yo|bye|goodbye|good (?:morning|night|evening|afternoon)|"
    r"(?:great|good|nice) (?:to|chatting|talking)|thanks?|thank you|congrat\w*|take care|"
    r"see you|talk (?:soon|later)|catch you|have a (?:good|great|nice)|sorry|way to go|"
    r"good (?:luck|job|for you|on you)|well done|keep (?:it up|going|rocking|rockin)|"
    r"you (?:got|can do) this|can't wait|me too|same here|no (?:problem|worries)|of course|"
    r"glad|happy (?:to hear|for you)|so (?:happy|glad|proud) for you|proud of you)\b",
    re.I,
)
_INTERJECTION = re.compile(
    r"^(?:(?:wow|whoa|oh|ooh|yeah|yes|yep|no|haha+|hah|hey|hi|hmm+|um+|uh|well|ah+|aw+|omg|lol|"
    r"ok|okay|so|and|but|also|anyway|plus|totally|definitely|absolutely|sure|gosh|geez|man|"
    r"dude|oh my|oh wow|thanks?|thank you)\b[,!.…]*\s+)+",
    re.I,
)
_INTENSIFIER = re.compile(
    r"\b(?:really|so|super|totally|definitely|absolutely|pretty|very|quite|actually|literally|"
    r"honestly|truly|just|such)\s+(?=\w)",
    re.I,
)
#: A sentence with fewer content words than this says nothing worth a note ("Wow, so cool!").
#: (2 was tried on LoCoMo dev, out of fold: it dropped more notes matching an observation
#: than chatter.)
MIN_CONTENT_WORDS = 1
_ONLY_A_NAME = re.compile(r"[A-Z][\w'-]*[\s,!.…]*")
#: How a reaction to what the other speaker said opens ("That's a great pic!", "Sounds like a
#: blast!", "It must have been awesome."): with at most ``REACTION_CONTENT_WORDS`` content
#: words after it, the sentence judges, it does not tell.  On LoCoMo dev such sentences yielded
#: their turn's reference observation 2 % of the time (203 sentences), notes overall 21 %.
_REACTION_OPENING = re.compile(
    r"^(?:that|this|it|they|those|these)(?:'s|'re|'ll|\s+(?:is|are|was|were|must|sounds?|"
    r"looks?|seems?|will))\b|^(?:sounds|looks|seems|must|what\s+an?|how)\b",
    re.I,
)
REACTION_CONTENT_WORDS = 1
_VOCATIVE_END = re.compile(r",\s*[A-Z][a-z]+\s*([!.…]*)$")
#: Words that never carry a claim on their own: a sentence of only these is a reaction.
_REACTION_WORDS = frozenset(
    """that's thats that is it's its this was what a an the so such really very super totally
    cool awesome amazing great nice good wonderful fantastic lovely beautiful sweet sounds
    sound like fun wow oh yeah yes true right agree agreed exactly absolutely definitely
    love it glad happy hear to for you thanks thank congrats congratulations haha lol omg
    hope well done awesome! incredible stunning gorgeous proud of me too same here i'm i am
    sure thing""".split()
)

# First and second person → names.  Order matters: contractions before the bare pronoun.
_FIRST: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bI'm\b|\bI am\b", re.I), "{s} is"),
    (re.compile(r"\bI've\b", re.I), "{s} has"),
    (re.compile(r"\bI'd\b", re.I), "{s} would"),
    (re.compile(r"\bI'll\b", re.I), "{s} will"),
    (re.compile(r"\bI was\b"), "{s} was"),
    (re.compile(r"\bI have\b"), "{s} has"),
    (re.compile(r"\bI don't\b|\bI do not\b"), "{s} doesn't"),
    (re.compile(r"\bI do\b"), "{s} does"),
    (re.compile(r"\bI\b"), "{s}"),
    (re.compile(r"\b[Mm]y\b"), "{s}'s"),
    (re.compile(r"\b[Mm]ine\b"), "{s}'s"),
    (re.compile(r"\b(?:me|myself)\b"), "{s}"),
]
_SECOND: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\byou're\b|\byou are\b", re.I), "{o} is"),
    (re.compile(r"\byou've\b", re.I), "{o} has"),
    (re.compile(r"\byou'll\b", re.I), "{o} will"),
    (re.compile(r"\byou'd\b", re.I), "{o} would"),
    (re.compile(r"\byou were\b", re.I), "{o} was"),
    (re.compile(r"\byou have\b", re.I), "{o} has"),
    (re.compile(r"\byour\b", re.I), "{o}'s"),
    (re.compile(r"\byours\b", re.I), "{o}'s"),
    (re.compile(r"\b(?:you|yourself)\b", re.I), "{o}"),
]
#: Any word of the second person ("you're" and the like included: "you" then ends a word).
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)

#: Words after "I" that are not a present-tense verb to conjugate.
_NOT_PRESENT = frozenset(
    """am was were will would could should can can't cannot might must may shall did didn't
    won't wouldn't couldn't shouldn't had went got made took saw came gave found felt thought
    knew told said began became bought brought caught chose drew drove ate fell fought flew
    forgot grew heard held hid hit hurt kept left lent let lost meant met paid put quit ran
    rode rang rose sat sold sent set shook shot showed shut sang sank slept spent spoke stood
    stole stuck swam taught threw tore understood woke wore won wrote read also still never
    always often usually really just actually even only too recently finally already once
    totally definitely absolutely sometimes""".split()
)
_I_VERB = re.compile(r"\bI ((?:(?:really|always|usually|often|also|just|still|never|"
                     r"sometimes|actually) )?)([a-z]+)\b(?!')")  # fmt: skip

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|last night|this morning|this evening|"
    r"(?:last|this|next) (?:week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")|"
    r"(?:a|one|two|three|four|five|six|a few|a couple of) (?:days?|weeks?|months?|years?) ago)\b",
    re.I,
)
_COUNTS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "a few": 3, "a couple of": 2}  # fmt: skip


def conjugate(verb: str) -> str:
    """The third-person singular of a present-tense ``verb`` ("go" → "goes")."""
    if verb in ("go", "do"):
        return verb + "es"
    if verb == "have":
        return "has"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _day(d: datetime) -> str:
    return f"{d.day} {month_name[d.month]} {d.year}"


def _month(months: int) -> str:
    return f"{month_name[months % 12 + 1]} {months // 12}"


def absolute(phrase: str, when: datetime) -> str:
    """The date a relative time ``phrase`` ("last week") means, said from ``when``: a day
    ("7 May 2023"), a week ("the week of 1 May 2023"), a month ("April 2023") or a year."""
    p = phrase.lower()
    if p == "yesterday" or p == "last night":
        return _day(when - timedelta(days=1))
    if p in ("today", "tonight", "this morning", "this evening"):
        return _day(when)
    if p.endswith(" ago"):
        amount, unit = p[: -len(" ago")].rsplit(" ", 1)
        n = _COUNTS.get(amount, 1)
        if unit.startswith("day"):
            return _day(when - timedelta(days=n))
        if unit.startswith("week"):
            return f"the week of {_day(when - timedelta(weeks=n))}"
        if unit.startswith("month"):
            return _month(when.year * 12 + when.month - 1 - n)
        return str(when.year - n)
    which, unit = p.split(" ", 1)
    step = {"last": -1, "this": 0, "next": 1}[which]
    if unit in _WEEKDAYS:
        delta = _WEEKDAYS.index(unit) - when.weekday()
        if step < 0:
            delta = delta - 7 if delta >= 0 else delta
        elif step > 0:
            delta = delta + 7 if delta <= 0 else delta
        return _day(when + timedelta(days=delta))
    if unit in ("week", "weekend"):
        return f"the {unit} of {_day(when + timedelta(weeks=step))}"
    if unit == "month":
        return _month(when.year * 12 + when.month - 1 + step)
    return str(when.year + step)


def is_chatter(sentence: str, names: tuple[str, ...] = ()) -> bool:
    """A question, greeting, thanks, or a reaction: no claim in it, or too few words to hold
    one (fewer than ``MIN_CONTENT_WORDS`` content words; ``names``, the people speaking, are
    not content: "Awesome, Mel!" is a reaction)."""
    if sentence.rstrip().endswith("?"):
        return True
    # "Hey Mel, I went hiking" holds a claim after its greeting; "Hey Mel!" does not.
    rest = _INTERJECTION.sub("", sentence)
    if _GREETING.match(rest) or _ONLY_A_NAME.fullmatch(rest):
        return True
    # "…, Mel!" addresses someone (tidy drops it): not a word of the claim.
    words = re.findall(r"[\w']+", _VOCATIVE_END.sub(lambda m: m.group(1), rest).lower())
    called = {n.lower() for n in names}
    content = [w for w in words if w not in _REACTION_WORDS and w not in STOPWORDS
               and len(w) > 2 and w not in called]  # fmt: skip
    if _REACTION_OPENING.match(rest.lstrip("\"' ")):
        return len(content) <= REACTION_CONTENT_WORDS
    return len(content) < MIN_CONTENT_WORDS


def tidy(sentence: str, names: tuple[str, ...] = ()) -> str:
    """``sentence`` without leading interjections, intensifiers and vocatives of ``names``."""
    s = _INTERJECTION.sub("", sentence).strip()
    # "…, Caroline!" / "Caroline, …" address someone; they are not part of the claim.  At the
    # end any one capitalised word after a comma is taken for a name (a nickname: "…, Mel!").
    s = _VOCATIVE_END.sub(lambda m: m.group(1), s)
    for name in names:
        s = re.sub(rf"(?:,\s*|^){re.escape(name)}\s*(?=[,.!…]|$)[,]?\s*", " ", s).strip()
    s = _INTENSIFIER.sub("", s)
    s = re.sub(r"\s+([,.!?…])", r"\1", " ".join(s.split())).strip(" ,")
    return s[:1].upper() + s[1:]


_SENTENCES = re.compile(r"[^.!?。！？]+[.!?。！？]?")


def sentences(text: str) -> Iterator[str]:
    """The sentences of ``text``, whitespace normalised."""
    for match in _SENTENCES.finditer(text):
        sentence = " ".join(match.group(0).split())
        if sentence:
            yield sentence


def third_person(sentence: str, speaker: str, listener: str | None = None) -> str:
    """``sentence`` with "I" as ``speaker`` (verbs made to agree) and, when ``listener`` is
    known, "you" as ``listener``."""

    def agree(m: re.Match[str]) -> str:
        verb = m.group(2)
        if verb not in _NOT_PRESENT and not verb.endswith(("ed", "n't")):
            verb = conjugate(verb)
        return f"I {m.group(1)}{verb}"

    s = _I_VERB.sub(agree, sentence)
    for pattern, template in _FIRST:
        s = pattern.sub(template.format(s=speaker), s)
    if listener is not None:
        for pattern, template in _SECOND:
            s = pattern.sub(template.format(o=listener), s)
    return s[:1].upper() + s[1:]


def dated(sentence: str, when: datetime | None) -> str:
    """``sentence`` with the date each relative time means, from ``when``, after it in
    brackets ("yesterday" → "yesterday (7 May 2023)"): the words the speaker chose stay."""
    if when is None:
        return sentence
    return _RELATIVE.sub(lambda m: f"{m.group(0)} ({absolute(m.group(0), when)})", sentence)


def candidates(text: str, names: tuple[str, ...] = ()) -> Iterator[str]:
    """The sentences of a turn that are not chatter (captions left out); ``names``: the
    people speaking (see ``is_chatter``)."""
    for sentence in sentences(_CAPTION.sub(" ", text)):
        if not is_chatter(sentence, names):
            yield sentence


def write(sentence: str, speaker: str, listener: str | None, when: datetime | None) -> str | None:
    """One sentence as a note (tidied, in the third person, dated), or None if it cannot be."""
    if listener is None and SECOND_PERSON.search(sentence):
        return None  # spoken to someone unknown: it would not read correctly out of context
    names = tuple(n for n in (speaker, listener) if n)
    s = dated(third_person(tidy(sentence, names), speaker, listener), when)
    if speaker.lower() not in s.lower():
        # Whose note it is must be in the note itself: it is read (and found) out of context.
        s = f"{speaker}: {s}"
    return s if s.endswith((".", "!", "…")) else s + "."
