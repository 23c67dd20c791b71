"""Rules for facts that change: attributes the base rules (``reader.rules``) miss, and what a
sentence says has *ended* ("I moved out of Lisbon", "I quit nursing", "I sold my Civic", "I'm
not vegan any more", "I'm over sushi").

Patterns, not a model, in the spirit of ``reader.rules``: each reads one first-person sentence.
``attributes`` gives ``(key, value)`` pairs (a car, a phone, a diet, a school, a language, a
partner, a favourite thing said another way); ``ended`` the values the sentence says no longer
hold; ``changed`` whether the sentence speaks of a change ("now", "switched", "new").  The long
tier (``tiers.long``) closes what an ended value names and what a new value of a single-valued
attribute replaces.
"""

from __future__ import annotations

import re

_END = r"(?=[,.!?;:]|$| and | but | because | with | since | for | at | in | on | to | after | so | last | this | every | instead)"
_CAP = r"([A-Z][\w'-]+(?: (?:[A-Z0-9][\w'-]*)){0,2})"
_THING = r"([\w' -]+?)"

#: Attributes with one value at a time beyond the base rules' (``rules.SINGLE_VALUED``).
SINGLE_VALUED = frozenset({"car", "phone", "diet", "school", "partner"})
#: Relations that are one person's partner (one at a time).
PARTNER_WORDS = frozenset({"wife", "husband", "partner", "boyfriend", "girlfriend", "fiance",
                           "fiancee", "fiancé", "fiancée"})  # fmt: skip

_CAR_BRANDS = (
    "Honda|Toyota|Ford|Tesla|Mazda|Volkswagen|VW|Subaru|Kia|Volvo|Fiat|Renault|Skoda|BMW|Audi|"
    "Mercedes|Nissan|Hyundai|Chevrolet|Chevy|Jeep|Peugeot|Citroen|Opel|Mini|Porsche|Lexus|"
    "Dodge|Seat|Suzuki|Mitsubishi|Jaguar|Land Rover|Range Rover|Dacia|Polestar|Rivian|Cupra"
)
_PHONE_BRANDS = (
    "iPhone|Pixel|Galaxy|Samsung|OnePlus|Moto|Motorola|Xperia|Sony|Nokia|Fairphone|Redmi|"
    "Xiaomi|Huawei|Oppo|Nothing Phone|BlackBerry"
)
_DIETS = (
    "vegetarian|vegan|pescatarian|keto|gluten-free|paleo|flexitarian|carnivore|dairy-free|"
    "lactose-free|low-carb|halal|kosher|raw vegan|plant-based"
)
_LANGUAGES = (
    "Spanish|Japanese|German|Italian|Korean|French|Portuguese|Mandarin|Chinese|Cantonese|Dutch|"
    "Arabic|Swedish|Greek|Russian|Polish|Turkish|Hindi|Norwegian|Danish|Finnish|Czech|Hebrew|"
    "Vietnamese|Thai|Indonesian|Ukrainian|Irish|Welsh|Latin|Swahili|Hungarian|Romanian"
)
_MODEL = r"(?: [A-Z0-9][\w'-]*){0,2}"
#: The speaker's own thing: "I drive a …", "I've got the …", "my (new) car is a …", "my …".
_MINE = (
    r"(?:\bI(?:'ve|'m| have| am)? (?:\w+ ){0,2}(?:a|an|the|my)(?: new| old| used)?|"
    r"\b[Mm]y(?: new| old)?(?: car| phone)?(?: is an?)?|"
    r"\b(?:bought|got|drive|driving|leased|own|ordered) (?:a|an|the|my)(?: new| used)?)"
)
#: Someone else as the clause's subject ("My friend Wes just bought a …").
_OTHER = re.compile(
    r"\b(?:[Mm]y (?:friend|brother|sister|mother|father|mom|dad|neighbou?r|colleague|boss|son|"
    r"daughter|cousin|aunt|uncle|parents)|[Hh]e|[Ss]he|[Tt]hey)\b"
)
#: Occupations a bare "I'm a …" names (with "work as a …" any word is one).
_JOB_WORDS = (
    "nurse paramedic teacher librarian accountant photographer chef baker plumber electrician "
    "architect pilot lawyer judge doctor dentist engineer developer programmer designer writer "
    "journalist editor firefighter mechanic carpenter farmer pharmacist therapist "
    "psychologist surgeon vet veterinarian waiter waitress bartender barista cashier manager "
    "consultant analyst scientist researcher professor lecturer tutor translator driver "
    "courier cook butcher gardener cleaner receptionist secretary banker economist musician "
    "artist painter actor dancer singer athlete coach trainer soldier sailor midwife optician "
    "physiotherapist realtor"
).split()
_JOB_PHRASES = (
    "police officer",
    "social worker",
    "software engineer",
    "data analyst",
    "web developer",
    "graphic designer",
    "flight attendant",
    "real estate agent",
)
_JOBS = "|".join([*_JOB_PHRASES, *_JOB_WORDS])

_ATTRIBUTES: list[tuple[str, re.Pattern[str]]] = [
    ("car", re.compile(rf"{_MINE} ((?:{_CAR_BRANDS}){_MODEL})\b")),
    ("phone", re.compile(rf"{_MINE} ((?:{_PHONE_BRANDS}){_MODEL})\b")),
    ("diet", re.compile(
        rf"\bI(?:'m| am|'ve been| have been| eat| went| go| am going| 'm going| stay)"
        rf"(?: now| mostly| fully| strictly)? ({_DIETS})\b", re.I)),
    ("diet", re.compile(rf"\b(?:going|went|turned|became|being) ({_DIETS})\b", re.I)),
    ("school", re.compile(
        r"\b(?:study|studying|student|enrolled|classes|transferred|a degree) "
        r"(?:at|to) ((?:the )?[A-Z][\w'-]+(?: (?:of )?[A-Z][\w'-]+){0,3})")),
    ("language", re.compile(rf"\b(?:learning|studying|learn|study|taking) ({_LANGUAGES})\b")),
    ("language", re.compile(rf"\b(?:my )?({_LANGUAGES}) (?:classes|lessons|course|tutor)\b")),
    ("lives_in", re.compile(rf"\b(?:relocated|moved back|moved|moving)(?: from [A-Z][\w'-]+)? to {_CAP}")),
    ("lives_in", re.compile(rf"\bI(?:'m| am) (?:based|living|settled) in {_CAP}")),
    ("lives_in", re.compile(rf"\b[Mm]y (?:new )?(?:place|flat|apartment|home|house) is in {_CAP}")),
    ("employer", re.compile(rf"\b(?:employed (?:at|by)|joined|position at|job at|I'm at) {_CAP}")),
    ("job", re.compile(
        r"\b(?:became|become|becoming|I'm|I am|I've been|I have been|retrained as) an? "
        rf"([a-z]+(?: [a-z]+)?) (?:now|these days|for \w+ years|since){_END}")),
    ("job", re.compile(r"\b(?:became|retrained as|work as|working as) an? ([a-z]+(?: [a-z]+)?)" + _END)),
    ("partner", re.compile(rf"\b(?:dating|seeing|together with|married to|engaged to) {_CAP}")),
    ("partner", re.compile(rf"\bI'm with {_CAP} (?:now|these days)")),
    ("partner", re.compile(
        rf"\b[Mm]y (?:new )?(?:partner|boyfriend|girlfriend|wife|husband|fianc[eé]e?) is {_CAP}")),
    ("job", re.compile(rf"\b(?:I'm|I am|I've been|I have been|became|become) an? ({_JOBS})\b")),
]  # fmt: skip
_PET = re.compile(
    r"\b(?:[Mm]y|[Oo]ur|a|an) (?:new |old |little |rescue )?(dog|cat|puppy|kitten|parrot|rabbit|"
    rf"hamster|horse|turtle|fish|bird|budgie|guinea pig|lizard|snake)(?:,)? (?:named |called )?{_CAP}"
)
_REPLACED: list[tuple[re.Pattern[str], int, int]] = [
    (re.compile(rf"\bfrom (?:the |my |a |an )?{_THING} to (?:the |my |a |an )?{_THING}{_END}"), 1, 2),
    (re.compile(rf"\breplaced (?:the |my )?{_THING} with (?:the |my |a |an )?{_THING}{_END}"), 1, 2),
    (re.compile(rf"\b{_THING} (?:has|have) replaced (?:the |my )?{_THING}{_END}"), 2, 1),
    (re.compile(rf"\b(?:used to be|was) {_THING},? (?:but )?now (?:it's|it is|they're) {_THING}{_END}"), 1, 2),
    (re.compile(rf"\b(?:is|are) {_THING} now,? not {_THING}{_END}"), 2, 1),
    (re.compile(rf"\b(?:pick|choose|prefer|take|rather \w+) {_THING} over {_THING}{_END}"), 2, 1),
    (re.compile(rf"\b(?:play|drink|eat|watch|use|drive|do) {_THING} instead of {_THING}{_END}"), 2, 1),
]  # fmt: skip
_FAVOURITE_IS = re.compile(
    rf"\b(?:[Ii]t's |[Ii]t is )?([A-Za-z][\w' -]*?) (?:is|are) (?:now )?my (?:new )?"
    rf"(?:favou?rite|number one|go-to) (\w+)(?: now)?{_END}"
)
_FAVOURITE_NOW = re.compile(
    rf"\b[Mm]y favou?rite (\w+)(?: to \w+)? (is|was|used to be) ([\w' -]+?)"
    rf"(?:,? (?:but )?now it's ([\w' -]+?))?{_END}"
)
_FAVOURITE_BARE = re.compile(
    rf"\bI (?:don't |do not )?(drink|eat|listen to|watch|read)\b.*?\b([A-Za-z][\w' -]*?) "
    rf"(?:is|are) (?:now )?my (?:new )?favou?rite(?: now)?{_END}"
)
_HOBBY = re.compile(rf"\b[Mm]y (?:big |main |new |favou?rite )?(?:hobby|pastime) is {_THING}{_END}")
_FAVOURITE_VERB = re.compile(
    r"\bI (drink|eat|listen to|watch|play|read) ([\w' -]+?) (?:every \w+|all the time|daily)?,? "
    r"(?:it's|they're|it is) my favou?rite\b"
)
_VERB_THING = {"drink": "drink", "eat": "food", "listen to": "band", "watch": "show",
               "play": "game", "read": "book"}  # fmt: skip
_DETERMINERS = re.compile(
    r"^(?:(?:my|the|a|an|our|being|on|job as an?|my job as an?|working as an?|work as an?|"
    r"learning|watching|playing|drinking|eating|studying at|the colour|colour)\s+)+",
    re.I,
)
_ENDED: list[re.Pattern[str]] = [
    re.compile(rf"\bmoved (?:out of|away from) {_CAP}"),
    re.compile(rf"\b(?:relocated|moved|transferred|switched|changed) (?:\w+ )?from (?:the |my )?{_THING} to\b"),
    # a verb that ends its object; "over" only as "I'm over X" ("a sunset over the ocean"
    # ends nothing), "put" only as "put X aside" ("I put so much into it" ends nothing)
    re.compile(rf"\b(?:quit|left|gave up|give up|stopped|dropped|lost interest in|ditched|done with|"
               rf"tired of|sold|got rid of|traded in|replaced|retired from|no more) "
               rf"(?:on )?{_THING}{_END}"),
    re.compile(rf"\b(?:I'm|I am|[Ww]e're|[Ww]e are)(?: so| totally| completely| really)? over "
               rf"(?!the moon){_THING}{_END}"),
    re.compile(rf"\bput (?:the |my )?{_THING} (?:aside|on hold|behind me|behind us)\b"),
    re.compile(rf"\b(?:broke up|split up|separated|divorced) (?:with|from) {_CAP}"),
    re.compile(rf"\b{_CAP} and I (?:broke up|split|split up|separated|divorced)"),
    re.compile(rf"\b(?:things|it's over|it is over) with {_CAP}"),
    re.compile(rf"\bafter (?:\w+ )?(?:years|months) (?:as an?|at|with|in) {_THING}{_END}"),
    re.compile(rf"\b(?:not|no longer) {_THING} any ?more\b"),
    re.compile(rf"\bdon't (?:\w+ )?{_THING} any ?more\b"),
    re.compile(rf"\b{_THING} (?:isn't|is not|wasn't|was not) (?:my thing|for me)\b"),
    re.compile(rf"\b(?:instead of|rather than|, not) {_THING}{_END}"),
    re.compile(rf"\b{_CAP} (?:went to live with|passed away|died|moved in with|ran away)"),
    re.compile(rf"\bgave {_CAP} to\b"),
    re.compile(r"\b(?:[Mm]y|[Oo]ur|[Tt]he) ([\w'-]+(?: [\w'-]+){0,2}) (?:died|broke|passed away|"
               r"went to live with|was stolen)\b"),
    re.compile(rf"\b[Mm]y favou?rite \w+ used to be {_THING}{_END}"),
]  # fmt: skip
_CHANGE = re.compile(
    r"\b(?:now|these days|nowadays|any ?more|no longer|new|switched|moved|quit|left|gave up|"
    r"stopped|instead|replaced|changed|became|broke up|split up|sold|traded|retrained|"
    r"transferred|relocated|not any more|used to|over)\b",
    re.I,
)
#: A negation just before an ending verb ("won't quit", "don't give up on", "never left").
_NEGATED = re.compile(r"(?:\b(?:not|never|no longer)|n't)(?: \w+){0,2}\s*$", re.I)
#: Words an ended value never starts with: after them the verb has no thing as its object.
_PREPOSITIONS = frozenset({"into", "in", "for", "to", "at", "with", "off", "out", "up", "down",
                           "from", "about", "of", "by", "through"})  # fmt: skip
_NOT_VALUES = frozenset({"it", "that", "this", "them", "there", "here", "home", "work", "job",
                         "me", "you", "everything", "nothing", "something", "all", "way"})  # fmt: skip


def attributes(sentence: str) -> list[tuple[str, str]]:
    """The (key, value) pairs a first-person ``sentence`` states that ``reader.rules`` does not
    read: car, phone, diet, school, language, partner, favourites said as "X is my favourite
    Y", and more ways to say a city, an employer or a job."""
    found = [(key, m.group(1)) for key, rx in _ATTRIBUTES for m in rx.finditer(sentence)
             if not _someone_else(sentence[: m.start()])]  # fmt: skip
    found += [(f"pet_{m.group(1).replace(' ', '_')}", m.group(2)) for m in _PET.finditer(sentence)]
    for m in _FAVOURITE_IS.finditer(sentence):
        thing = _clean(m.group(1).split(",")[-1])
        found.append((f"favourite_{m.group(2).lower()}", thing))
    for m in _FAVOURITE_NOW.finditer(sentence):
        if m.group(4) or m.group(2) == "is":
            found.append((f"favourite_{m.group(1).lower()}", m.group(4) or m.group(3)))
    for m in _FAVOURITE_BARE.finditer(sentence):
        found.append((f"favourite_{_VERB_THING[m.group(1)]}", m.group(2).split(",")[-1]))
    found += [("interest", m.group(1)) for m in _HOBBY.finditer(sentence)]
    for m in _FAVOURITE_VERB.finditer(sentence):
        found.append((f"favourite_{_VERB_THING[m.group(1)]}", m.group(2)))
    out = []
    for key, value in found:
        value = _clean(value)
        if value and value.lower() not in _NOT_VALUES and len(value) <= 40:
            out.append((key, value))
    return list(dict.fromkeys(out))


def replacements(sentence: str) -> list[tuple[str, str]]:
    """(old, new) value pairs ``sentence`` says one replaced the other ("switched from coffee
    to tea", "Y has replaced X", "used to be X, but now it's Y", "Y over X")."""
    pairs = []
    for rx, old, new in _REPLACED:
        for m in rx.finditer(sentence):
            a, b = _clean(m.group(old)), _clean(m.group(new))
            if (
                a
                and b
                and a.lower() != b.lower()
                and {a.lower(), b.lower()}.isdisjoint(_NOT_VALUES)
            ):
                pairs.append((a, b))
    return list(dict.fromkeys(pairs))


def _someone_else(before: str) -> bool:
    """Whether the clause before a match is about someone else: another person named since
    the speaker last was ("My friend Wes just bought a …")."""
    other = list(_OTHER.finditer(before))
    if not other:
        return False
    return re.search(r"\b(?:I|I'm|I've)\b", before[other[-1].end() :]) is None


def ended(sentence: str) -> list[str]:
    """The values ``sentence`` says no longer hold ("moved out of Lisbon" → Lisbon).

    Not a value: what a negation comes just before ("I won't quit my dreams", "don't give up
    on it", "I'll never forget that day" say the opposite of an ending), nor words that start
    with a preposition ("left for our vacation", "dropped off the cake"): the verb then does
    not take a thing as its object."""
    values = []
    for rx in _ENDED:
        for m in rx.finditer(sentence):
            value = _clean(m.group(1))
            if not value or value.lower() in _NOT_VALUES or _NEGATED.search(sentence[: m.start()]):
                continue
            if value.split()[0].lower() not in _PREPOSITIONS:
                values.append(value)
    return list(dict.fromkeys(values))


def changed(sentence: str) -> bool:
    """Whether ``sentence`` speaks of a change (a new value, something given up)."""
    return _CHANGE.search(sentence) is not None


def group(key: str) -> str:
    """The attribute a key belongs to: ``pet_dog`` and ``pet_cat`` are both ``pet``; a
    boyfriend, a wife and a partner are all ``partner``."""
    if key.startswith("pet_"):
        return "pet"
    return "partner" if key in PARTNER_WORDS else key


def single_valued(key: str, base: frozenset[str]) -> bool:
    """Whether an attribute holds one value at a time: ``base`` (``rules.SINGLE_VALUED``),
    this module's, and every favourite."""
    name = group(key)
    return name in base or name in SINGLE_VALUED or name.startswith("favourite_")


def same_value(a: str, b: str) -> bool:
    """Whether two values name the same thing: equal, one a word-wise part of the other
    ("Civic" of "Honda Civic"), or one word the stem of the other ("nursing", "nurse")."""
    a, b = a.strip().lower(), b.strip().lower()
    if not a or not b:
        return False
    if a == b or _within(a, b) or _within(b, a):
        return True
    wa, wb = a.split(), b.split()
    if len(wa) == 1 and len(wb) == 1:
        n = len(_prefix(a, b))
        return n >= 4 and n >= 0.8 * min(len(a), len(b))
    return False


def _within(part: str, whole: str) -> bool:
    return len(part) >= 3 and re.search(rf"(?<!\w){re.escape(part)}(?!\w)", whole) is not None


def _prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _clean(value: str) -> str:
    value = _DETERMINERS.sub("", value.strip(" '\"")).strip(" '\"")
    value = re.sub(r"\s+(?:now|again|any ?more|these days|lately|instead|completely|for good)$",
                   "", value, flags=re.I)  # fmt: skip
    return value.strip()
