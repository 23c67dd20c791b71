"""The offline reader's rules: first-person statements become facts, profile attributes and
preferences; the assistant's commitments become knowledge.  Patterns, not a model: they miss
much and invent nothing, since every finding is a rewrite of a sentence of its page.

Facts are the page's first-person sentences rewritten in the third person ("I adopted a cat" →
"Ann adopted a cat"), so they read correctly out of context and name their subject.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memstrata.model import MemoryItem
from memstrata.reader.findings import Finding

_SENTENCES = re.compile(r"[^.!?。！？]+[.!?。！？]?")
_END = r"(?=[,.!?;]|$| and | but | because | with | since | for | at | in )"
_NAME = r"([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)"
_PLACE = r"([A-Z][\w'-]+(?: [A-Z][\w'-]+){0,2})"

#: Attributes with one value at a time: a new value contradicts the old one.
SINGLE_VALUED = frozenset(
    {"name", "age", "lives_in", "from", "job", "employer", "birthday", "partner", "mother",
     "father"}
)  # fmt: skip

_PROFILE: list[tuple[str, re.Pattern[str]]] = [
    ("name", re.compile(rf"\b[Mm]y name is {_NAME}")),
    ("age", re.compile(r"\bI(?:'m| am) (\d{1,3}) (?:years? old|now)\b")),
    ("lives_in", re.compile(rf"\bI (?:live|am living|'m living) in {_PLACE}")),
    ("lives_in", re.compile(rf"\bI (?:just |recently |finally )?moved to {_PLACE}")),
    ("from", re.compile(rf"\bI(?:'m| am| come) from {_PLACE}")),
    ("job", re.compile(rf"\bI (?:work|am working|'m working) as an? ([\w -]+?){_END}")),
    ("job", re.compile(rf"\b[Mm]y (?:new )?job as an? ([\w -]+?){_END}")),
    ("employer", re.compile(rf"\bI (?:work|am working|'m working) (?:at|for) {_PLACE}")),
    ("birthday", re.compile(rf"\b[Mm]y birthday is (?:on )?([\w ]+?){_END}")),
]
_RELATION = re.compile(
    r"\b[Mm]y (wife|husband|partner|boyfriend|girlfriend|sister|brother|mother|mom|father|dad|"
    rf"son|daughter|best friend|friend)(?:'s name is|,| is called| called| named)? {_NAME}"
)
_PET = re.compile(
    r"\b(?:[Mm]y|I have an?|I adopted an?|I got an?) (?:\w+ )?(dog|cat|puppy|kitten|parrot|rabbit|"
    rf"hamster|horse|turtle|fish)(?:,)? (?:named|called) {_NAME}"
)
_FAVOURITE = re.compile(rf"\b[Mm]y favou?rite (\w+(?: \w+)?) is ([\w' -]+?){_END}")
_LIKE = re.compile(
    r"\bI (?:really |absolutely |just |also )?(love|like|enjoy|adore|prefer|am into|'m into|"
    rf"hate|dislike|can't stand|cannot stand|don't like|do not like) ([\w' -]+?){_END}"
)
_HABIT = re.compile(rf"\bI (?:always|usually|often|regularly) ([\w' -]+?){_END}")
_NEGATIVE = ("hate", "dislike", "can't stand", "cannot stand", "don't like", "do not like")
_COMMITMENT = re.compile(
    r"\b(?:I'll|I will|I can|remember|note that|I recommend|I suggest)\b", re.I
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|me|[Ww]e|[Oo]ur)\b")
_PRONOUNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bI'm\b|\bI am\b"), "{s} is"),
    (re.compile(r"\bI've\b|\bI have\b"), "{s} has"),
    (re.compile(r"\bI'd\b"), "{s} would"),
    (re.compile(r"\bI'll\b"), "{s} will"),
    (re.compile(r"\bI was\b"), "{s} was"),
    (re.compile(r"\bI\b"), "{s}"),
    (re.compile(r"\b[Mm]y\b"), "{s}'s"),
    (re.compile(r"\b[Mm]ine\b"), "{s}'s"),
    (re.compile(r"\b(?:me|myself)\b"), "{s}"),
]


#: Common verbs in the present tense after "I", conjugated for the third person.
_PRESENT = frozenset(
    """live work love like hate enjoy want need think feel know prefer play drink eat run teach
    study go do cook read write paint try wish hope plan miss own use watch visit volunteer
    collect practice practise speak owe agree remember guess bet say see mean believe""".split()
)
_ADVERB = r"(?:(?:really|always|usually|often|also|just|still|never|sometimes|actually) )?"
_I_VERB = re.compile(rf"\bI ({_ADVERB})(\w+)\b")
_TEMPLATES = {
    "name": "{s}'s name is {v}",
    "age": "{s} is {v} years old",
    "lives_in": "{s} lives in {v}",
    "from": "{s} is from {v}",
    "job": "{s} works as {v}",
    "employer": "{s} works at {v}",
}


def _conjugate(verb: str) -> str:
    if verb in ("go", "do"):
        return verb + "es"
    if verb.endswith(("s", "sh", "ch", "x", "z")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(sentence: str, subject: str) -> str:
    """``sentence`` with first-person singular pronouns replaced by ``subject`` (and the
    commonest present-tense verbs after "I" conjugated to agree)."""

    def agree(m: re.Match[str]) -> str:
        verb = m.group(2)
        verb = _conjugate(verb) if verb in _PRESENT else verb
        return f"I {m.group(1)}{verb}"

    sentence = _I_VERB.sub(agree, sentence)
    for pattern, replacement in _PRONOUNS:
        sentence = pattern.sub(replacement.format(s=subject), sentence)
    return sentence


def sentences(text: str) -> Iterator[str]:
    for match in _SENTENCES.finditer(text):
        sentence = " ".join(match.group(0).split())
        if sentence:
            yield sentence


def read_page(page: MemoryItem) -> list[Finding]:
    """Every finding of one page (a turn), each citing the page."""
    subject = page.speaker or page.role or "user"
    found: list[Finding] = []
    for sentence in sentences(page.text):
        if sentence.endswith("?"):
            continue
        if page.role == "assistant":
            if _COMMITMENT.search(sentence):
                found.append(_finding("knowledge", sentence, subject, page))
            continue
        found += _profile(sentence, subject, page) + _preferences(sentence, subject, page)
        if _FIRST_PERSON.search(sentence) and len(sentence.split()) >= 5:
            found.append(_finding("fact", third_person(sentence, subject), subject, page, 0.5))
    return found


def _finding(
    kind: str, text: str, subject: str, page: MemoryItem, confidence: float = 0.6, **fields: object
) -> Finding:
    return Finding(type=kind, text=text, subject=subject, sources=(page.id,),  # type: ignore[arg-type]
                   confidence=confidence, **fields)  # type: ignore[arg-type]  # fmt: skip


def _profile(sentence: str, subject: str, page: MemoryItem) -> list[Finding]:
    found = []
    matches = [(key, m.group(1)) for key, rx in _PROFILE for m in rx.finditer(sentence)]
    for m in _RELATION.finditer(sentence):
        matches.append((m.group(1).replace("mom", "mother").replace("dad", "father"), m.group(2)))
    matches += [(f"pet_{m.group(1)}", m.group(2)) for m in _PET.finditer(sentence)]
    matches += [(f"favourite_{m.group(1).replace(' ', '_')}", m.group(2))
                for m in _FAVOURITE.finditer(sentence)]  # fmt: skip
    for key, value in matches:
        value = value.strip(" '")
        template = _TEMPLATES.get(key, "{s}'s " + key.replace("_", " ") + " is {v}")
        text = template.format(s=subject, v=value)
        found.append(_finding("profile", text, subject, page, 0.8, key=key, value=value))
    return found


_TRAILING = re.compile(
    r"(?: (?:now|anymore|any more|again|too|so much|a lot|very much|these days"
    r"|lately|nowadays))+$"
)


def _object(text: str) -> str:
    """The thing liked, without trailing time and degree words ("coffee now" → "coffee")."""
    return _TRAILING.sub("", text.strip()).strip()


def _preferences(sentence: str, subject: str, page: MemoryItem) -> list[Finding]:
    found = []
    for m in _LIKE.finditer(sentence):
        verb, thing = m.group(1), _object(m.group(2))
        polarity = -1 if verb in _NEGATIVE else 1
        text = f"{subject} {'dislikes' if polarity < 0 else 'likes'} {thing}"
        found.append(_finding("preference", text, subject, page, 0.8, key=thing.lower(),
                              polarity=polarity))  # fmt: skip
    for m in _HABIT.finditer(sentence):
        habit = _object(m.group(1))
        found.append(_finding("preference", third_person(sentence, subject), subject, page, 0.5,
                              key=habit.lower(), polarity=1, explicit=False))  # fmt: skip
    return found
