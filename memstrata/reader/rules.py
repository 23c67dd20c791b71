"""The offline reader's rules: first-person statements become profile attributes and
preferences; the assistant's commitments become knowledge.  Patterns, not a model: they miss
much and invent nothing, since every finding is a rewrite of a sentence of its page.
"""

from __future__ import annotations

import re

from memstrata.model import MemoryItem
from memstrata.reader import changes
from memstrata.reader.findings import Finding
from memstrata.reader.notes import SECOND_PERSON, sentences, third_person

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
# Interests: an activity the speaker does or loves.  A gerund after a verb of doing or liking
# ("went hiking", "I love painting") only when it is a pastime (``_PASTIMES``: "started
# transitioning" and "been caring" are not interests); any gerund before a word of practice
# ("a hiking trip", "my painting class"); a game or an instrument played; a pastime one is
# "into" or has "taken up".
_ACTIVITY = re.compile(
    r"\b(?:go|goes|going|went|gone|love|loves|enjoy|enjoys|like|likes|started|start|tried|"
    r"try|took up|taking up|into|practice|practise|been|do|did|doing) ([a-z]+ing)\b",
    re.I,
)
_PRACTICE = re.compile(
    r"\b([a-z]+ing) (?:trips?|trails?|class(?:es)?|clubs?|groups?|sessions?|lessons?|boots|"
    r"gear|buddies|buddy|team)\b",
    re.I,
)
_PASTIMES = frozenset(
    """hiking swimming running jogging camping painting drawing sketching reading writing
    journaling blogging cooking baking grilling dancing singing gardening fishing hunting
    surfing skiing snowboarding skating skateboarding cycling biking climbing bouldering
    kayaking canoeing sailing rowing paddleboarding snorkeling snorkelling diving knitting
    sewing crocheting quilting scrapbooking crafting woodworking sculpting volunteering
    traveling travelling backpacking trekking mountaineering birdwatching stargazing
    meditating gaming bowling golfing boxing wrestling fencing shooting horseriding riding
    walking rollerblading weightlifting lifting acting drumming composing photographing
    coding programming collecting foraging beekeeping skydiving exploring""".split()
)
_GAME_OR_INSTRUMENT = (
    r"guitar|piano|violin|cello|drums|flute|saxophone|trumpet|ukulele|harp|bass|keyboard|"
    r"basketball|football|soccer|tennis|volleyball|baseball|hockey|golf|chess|badminton|"
    r"rugby|cricket|softball|pickleball|squash|table tennis|ping pong|video games|board games"
)
_PLAYS = re.compile(
    rf"\b(?:play|plays|playing|played) (?:the |some |a lot of )?({_GAME_OR_INSTRUMENT})\b", re.I
)
_NOUN_PASTIME = re.compile(
    r"\b(?:into|took up|taken up|taking up|practice|practise|love|enjoy) "
    r"(pottery|yoga|photography|pilates|karate|judo|taekwondo|origami|calligraphy|"
    r"astronomy|archery|ballet|salsa|tango|poetry|music|art)\b",
    re.I,
)
_NOT_ACTIVITIES = frozenset(
    """anything something nothing everything thing being going doing getting having making
    feeling saying thinking trying looking seeing working living morning evening during
    bring king ring spring sing wedding building meeting learning planning hoping waiting
    wondering considering taking using helping starting coming leaving telling asking
    talking chatting""".split()
)
# Family without a name ("my husband and kids"): who the speaker lives among.
_FAMILY = re.compile(
    r"\b[Mm]y (husband|wife|partner|boyfriend|girlfriend|fianc[eé]e?|kids|children|son|sons|"
    r"daughter|daughters|baby|parents|grandkids|grandchildren)\b"
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|my|me|we|our)\b")
#: The speaker in any case ("My car…", "We moved…"): what the change rules read.
_SPEAKER = re.compile(r"\b(?:I|I'm|I've|I'd|[Mm]y|[Mm]e|[Ww]e|[Oo]ur|[Uu]s)\b")

_TEMPLATES = {
    "interest": "{s} is into {v}",
    "name": "{s}'s name is {v}",
    "age": "{s} is {v} years old",
    "lives_in": "{s} lives in {v}",
    "from": "{s} is from {v}",
    "job": "{s} works as {a} {v}",
    "employer": "{s} works at {v}",
    "family": "{s} has {a} {v}",
    "car": "{s} drives {a} {v}",
    "phone": "{s}'s phone is {a} {v}",
    "diet": "{s} is {v}",
    "school": "{s} studies at {v}",
    "language": "{s} is learning {v}",
}
#: Family words that take no article ("Mel has kids").
_PLURAL_FAMILY = frozenset(
    {"kids", "children", "sons", "daughters", "parents", "grandkids", "grandchildren"}
)


def read_page(page: MemoryItem) -> list[Finding]:
    """The profile attributes, preferences and assistant knowledge of one page (a turn), each
    citing the page.  Facts are notes (``reader.notes``), chosen by ``reader.worthiness``."""
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
    gone = changes.ended(sentence) if _SPEAKER.search(sentence) else []
    if _SPEAKER.search(sentence):
        matches += changes.attributes(sentence)
        matches += [(key, new) for key, old in matches for before, new in
                    changes.replacements(sentence) if changes.same_value(old, before)]  # fmt: skip
    # A value the sentence says has ended is not stated by it ("I sold my Civic and …").
    matches = [(k, v) for k, v in matches if not any(changes.same_value(v, g) for g in gone)]
    if _FIRST_PERSON.search(sentence):
        activities = {m.group(1).lower() for m in _ACTIVITY.finditer(sentence)} & _PASTIMES
        activities |= {m.group(1).lower() for m in _PRACTICE.finditer(sentence)}
        activities |= {m.group(1).lower() for rx in (_PLAYS, _NOUN_PASTIME)
                       for m in rx.finditer(sentence)}  # fmt: skip
        matches += [("interest", a) for a in sorted(activities - _NOT_ACTIVITIES)]
        matches += [("family", m.group(1).lower()) for m in _FAMILY.finditer(sentence)]
    change = {"change": "1"} if changes.changed(sentence) else {}
    for key, value in _distinct(matches):
        value = _object(value.strip(" '"))
        article = "an" if value[:1] in "aeiou" else "a"
        template = _TEMPLATES.get(key, "{s}'s " + key.replace("_", " ") + " is {v}")
        if key == "family" and value in _PLURAL_FAMILY:
            template = "{s} has {v}"
        text = template.format(s=subject, v=value, a=article)
        found.append(_finding("profile", text, subject, page, 0.8, key=key, value=value,
                              extra=change))  # fmt: skip
    return found


def _distinct(matches: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``matches`` without repeats, and without a value of an attribute that another match
    of the same attribute holds whole ("Civic" beside "Honda Civic")."""
    out: list[tuple[str, str]] = []
    for key, value in dict.fromkeys((k, v.strip(" '")) for k, v in matches):
        if any(k == key and v != value and value in v for k, v in matches):
            continue
        out.append((key, value))
    return out


def ended(page: MemoryItem) -> list[str]:
    """The values the speaker of ``page`` says no longer hold ("I moved out of Lisbon",
    "I quit nursing"; ``reader.changes.ended``); none for the assistant's pages."""
    if page.role == "assistant":
        return []
    found: list[str] = []
    for sentence in sentences(page.text):
        if not sentence.endswith("?") and _SPEAKER.search(sentence):
            found += changes.ended(sentence)
            found += [old for old, _ in changes.replacements(sentence)]
    return list(dict.fromkeys(found))


def replaced(page: MemoryItem) -> list[tuple[str, str]]:
    """The (old, new) values the speaker of ``page`` says one replaced the other ("I switched
    from coffee to tea"; ``reader.changes.replacements``)."""
    if page.role == "assistant":
        return []
    return list(dict.fromkeys(
        pair for sentence in sentences(page.text)
        if not sentence.endswith("?") and _SPEAKER.search(sentence)
        for pair in changes.replacements(sentence)
    ))  # fmt: skip


_TRAILING = re.compile(
    r"(?: (?:now|anymore|any more|again|too|so much|a lot|very much|these days"
    r"|lately|nowadays))+$"
)


def _object(text: str) -> str:
    """The thing liked, without trailing time and degree words ("coffee now" → "coffee")."""
    return _TRAILING.sub("", text.strip()).strip()


_CONTENT = re.compile(r"\b(?!(?:to|the|a|an|it|that|this|them|so|too|more)\b)[a-z]{3,}", re.I)
_NOT_A_THING = re.compile(
    r"^(?:that|how|when|what|it|this|you|to see|to hear)\b|\b(?:you|your|me|my)\b", re.I
)


def _preferences(sentence: str, subject: str, page: MemoryItem) -> list[Finding]:
    found = []
    for m in _LIKE.finditer(sentence):
        verb, thing = m.group(1), _object(m.group(2))
        if _NOT_A_THING.search(thing) or not _CONTENT.search(thing):
            continue  # "I love that you came", "I like how it…": a clause about someone, not a
            # taste; "I'd love to.": no thing at all
        polarity = -1 if verb in _NEGATIVE else 1
        text = f"{subject} {'dislikes' if polarity < 0 else 'likes'} {thing}"
        found.append(_finding("preference", text, subject, page, 0.8, key=thing.lower(),
                              polarity=polarity))  # fmt: skip
    for m in _HABIT.finditer(sentence):
        habit = _object(m.group(1))
        if SECOND_PERSON.search(sentence):
            continue  # it would not read correctly out of its conversation
        found.append(_finding("preference", third_person(sentence, subject), subject, page, 0.5,
                              key=habit.lower(), polarity=1, explicit=False))  # fmt: skip
    return found
