"""The knowledge-update stories (``memstrata eval updates``): generated, deterministic.

Each story is one person talking with an assistant over several sessions: the first states a
fact about them in a paraphrase among chit-chat, sessions of unrelated chatter follow (with
distractors: other people's cities, jobs and cars), and a later session changes the fact in
another paraphrase ("moved", "quit", "switched", "broke up", "sold", "not X any more", "now Y",
"I'm over X"); some stories change it back later still.  Each story asks a question about the
present (answered by the newest value) and one about the past (answered by the value before).

Every attribute kind has two disjoint halves of names, values and phrasings: ``tune``, the half
the rules and weights were developed against, and ``held``, a half kept out of that work, so
the two halves' figures show how much of the result is fitted to the wording.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

HALVES = ("tune", "held")
#: Stories per attribute kind and half.
PER_HALF = 2
SEED = 25


@dataclass(frozen=True)
class Kind:
    """One attribute kind: values and phrasings per half.

    ``state`` and ``change`` phrasings take ``{v}`` / ``{old}`` and ``{new}``; questions take
    ``{n}`` (the person's name) and, for the past question, ``{new}``.
    """

    name: str
    values: tuple[tuple[str, ...], tuple[str, ...]]
    state: tuple[tuple[str, ...], tuple[str, ...]]
    change: tuple[tuple[str, ...], tuple[str, ...]]
    present: tuple[str, str]
    past: tuple[str, str]


def _k(name: str, values: str, held_values: str, state: tuple[str, ...],
       held_state: tuple[str, ...], change: tuple[str, ...], held_change: tuple[str, ...],
       present: tuple[str, str], past: tuple[str, str]) -> Kind:  # fmt: skip
    return Kind(name, (_split(values), _split(held_values)), (state, held_state),
                (change, held_change), present, past)  # fmt: skip


def _split(values: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in values.split("|"))


KINDS: tuple[Kind, ...] = (
    _k("home city", "Lisbon|Porto|Denver|Austin|Leeds|Dublin", "Valencia|Krakow|Seattle|Toronto|Lyon|Bristol",
       ("I live in {v}, right by the river.", "I'm living in {v} at the moment, in a tiny flat."),
       ("Home for me is {v}, a small place near the old town.", "My apartment is in {v}, close to the station."),
       ("I finally moved out of {old}, I live in {new} now.", "We packed up and moved to {new} last month, {old} feels far away."),
       ("Big news: I relocated from {old} to {new} in March.", "I'm not in {old} any more, my new place is in {new}."),
       ("Where does {n} live?", "Which city is {n} based in now?"),
       ("Where did {n} live before?", "Which city did {n} use to live in?")),
    _k("job", "nurse|paramedic|teacher|librarian|accountant|photographer", "chef|baker|plumber|electrician|architect|pilot",
       ("I work as a {v} at the city hospital.", "I'm a {v}, it keeps me busy all week."),
       ("I've been a {v} for six years now, long shifts.", "By day I'm a {v}, have been since college."),
       ("I quit my job as a {old} last month, I'm a {new} now.", "I stopped working as a {old}; these days I work as a {new}."),
       ("After years as a {old} I switched careers and became a {new}.", "No more {old} shifts for me, I retrained and I'm a {new} now."),
       ("What is {n}'s job?", "What does {n} do for a living now?"),
       ("What did {n} do for work before?", "What job did {n} use to have?")),
    _k("employer", "Google|Siemens|Spotify|Deloitte|Airbus|Nokia", "Philips|Ubisoft|Heineken|Lufthansa|Ikea|Zalando",
       ("I work at {v} in the data team.", "I'm employed at {v}, mostly remote."),
       ("I've been with {v} since graduating.", "My employer is {v}, the office is huge."),
       ("I left {old} and joined {new} this spring.", "I work at {new} now, I handed in my notice at {old}."),
       ("Started a new position at {new} after five years at {old}.", "I'm done with {old}; my new employer is {new}."),
       ("Where does {n} work?", "Which company does {n} work for now?"),
       ("Where did {n} work before?", "Which company did {n} use to work for?")),
    _k("partner", "Tom|Marcus|Ethan|Julia|Sofia|Priya", "Diego|Felix|Omar|Hannah|Chloe|Nadia",
       ("My boyfriend {v} and I went hiking on Sunday.", "My partner {v} cooked dinner for us last night."),
       ("I've been dating {v} for two years.", "{v} and I have been together since university."),
       ("{old} and I broke up, I'm seeing {new} now.", "I split up with {old} in the spring; my partner is {new} now."),
       ("Things with {old} ended; I'm with {new} these days.", "I'm dating {new} now, it's over with {old}."),
       ("Who is {n}'s partner?", "Who is {n} dating now?"),
       ("Who was {n}'s partner before?", "Who did {n} use to date?")),
    _k("pet", "Rex|Bella|Max|Luna|Milo|Coco", "Biscuit|Pepper|Shadow|Ziggy|Nala|Oreo",
       ("I have a dog named {v}, he loves the beach.", "My cat {v} sleeps on my keyboard all day."),
       ("We adopted a puppy called {v} last year.", "Our rabbit {v} chewed through a cable again."),
       ("I gave {old} to my parents' farm, and I got a cat named {new}.", "{old} went to live with my sister; now I have a kitten called {new}."),
       ("After {old} passed away we adopted a dog named {new}.", "Our new pet is a parrot named {new}; {old} lives with my aunt now."),
       ("What is the name of {n}'s pet?", "What pet does {n} have now?"),
       ("What was the name of {n}'s pet before?", "Which pet did {n} use to have?")),
    _k("car", "Honda Civic|Toyota Corolla|Ford Focus|Tesla Model 3|Mazda 3|Volkswagen Golf", "Subaru Outback|Kia Niro|Volvo XC60|Fiat Panda|Renault Clio|Skoda Octavia",
       ("I drive a {v} to work every day.", "My car is a {v}, it's old but reliable."),
       ("I've been driving a {v} for years.", "Picked up the kids in my {v} again today."),
       ("I sold my {old} and bought a {new}.", "I got rid of the {old}, I drive a {new} now."),
       ("Traded in the {old}; my new car is a {new}.", "No more {old} for me, I bought a {new} last week."),
       ("What car does {n} drive?", "What car does {n} have now?"),
       ("What car did {n} drive before?", "Which car did {n} use to have?")),
    _k("phone", "iPhone 12|Pixel 7|Galaxy S21|OnePlus 9|Moto G|Xperia 5", "Nokia G50|Pixel 8|iPhone 15|Galaxy A54|Fairphone 4|Redmi Note",
       ("I use an {v}, the battery is still fine.", "My phone is a {v}."),
       ("I've had my {v} for three years.", "Took these photos on my {v}."),
       ("I switched from the {old} to a {new}.", "My {old} died, so I got a {new}."),
       ("I'm on a {new} now, the {old} went to my nephew.", "Replaced the {old} with a {new} last weekend."),
       ("What phone does {n} use?", "Which phone does {n} have now?"),
       ("What phone did {n} use before?", "Which phone did {n} use to have?")),
    _k("diet", "vegetarian|vegan|pescatarian|keto|gluten-free|paleo", "vegan|vegetarian|keto|pescatarian|paleo|gluten-free",
       ("I'm {v}, have been for a while.", "I eat {v}, so I cook most meals myself."),
       ("I've been {v} since last summer.", "Going {v} was the best decision I made."),
       ("I'm not {old} any more, I'm {new} now.", "I gave up being {old}; these days I eat {new}."),
       ("I quit {old} after a year and went {new}.", "{old} wasn't for me in the end, I'm {new} now."),
       ("What diet does {n} follow?", "How does {n} eat now?"),
       ("What diet did {n} follow before?", "How did {n} use to eat?")),
    _k("school", "Boston University|McGill|Oxford Brookes|Lincoln College|Trinity College|Monash", "Bard College|Bath Spa|Carleton|Rice University|Aalto|Emory",
       ("I study at {v}, second year.", "I'm a student at {v}."),
       ("My classes at {v} start early.", "I enrolled at {v} last autumn."),
       ("I transferred from {old} to {new}.", "I left {old}; I'm studying at {new} now."),
       ("I switched universities, from {old} to {new}.", "No more {old} for me, I'm enrolled at {new}."),
       ("Where does {n} study?", "Which school does {n} go to now?"),
       ("Where did {n} study before?", "Which school did {n} use to go to?")),
    _k("favourite food", "sushi|tacos|lasagne|ramen|paella|curry", "dumplings|pho|risotto|falafel|burritos|gnocchi",
       ("My favourite food is {v}.", "Nothing beats {v}, it's my favourite food."),
       ("{v} is the best food in the world, I could eat it every day.", "I'd eat {v} for every meal if I could."),
       ("I'm over {old} now, {new} is my favourite food.", "My favourite food used to be {old}, but now it's {new}."),
       ("These days I'd pick {new} over {old} any day, it's my new favourite food.", "Forget {old}; {new} is my number one food now."),
       ("What is {n}'s favourite food?", "What food does {n} love most now?"),
       ("What was {n}'s favourite food before?", "Which food did {n} use to love?")),
    _k("favourite drink", "coffee|tea|lemonade|kombucha|espresso|hot chocolate", "matcha|chai|iced tea|cider|smoothies|cold brew",
       ("My favourite drink is {v}.", "I drink {v} every morning, it's my favourite."),
       ("I can't start the day without {v}.", "{v} is my go-to drink."),
       ("I switched from {old} to {new}, it's my favourite drink now.", "I don't drink {old} any more, {new} is my favourite."),
       ("{new} has replaced {old} as my morning drink.", "I'm over {old}, I'm all about {new} these days."),
       ("What is {n}'s favourite drink?", "What does {n} drink now?"),
       ("What was {n}'s favourite drink before?", "What did {n} use to drink?")),
    _k("favourite sport", "football|basketball|baseball|cricket|rugby|ice hockey", "handball|volleyball|cycling|formula one|water polo|snooker",
       ("My favourite sport to watch is {v}.", "I never miss a {v} game on TV, it's my favourite sport."),
       ("I follow {v} more than anything else on TV.", "Watching {v} with friends is my weekend ritual."),
       ("I'm over {old}, {new} is my favourite sport now.", "I stopped watching {old}; now I watch {new} instead."),
       ("Lately I'd rather watch {new} than {old}.", "I lost interest in {old}, {new} is the sport I follow now."),
       ("What is {n}'s favourite sport?", "Which sport does {n} watch now?"),
       ("What was {n}'s favourite sport before?", "Which sport did {n} use to watch?")),
    _k("favourite band", "Coldplay|Radiohead|Arctic Monkeys|Muse|Blur|Oasis", "Tame Impala|Daft Punk|The Strokes|Portishead|Massive Attack|Bastille",
       ("My favourite band is {v}.", "I listen to {v} all the time, they're my favourite band."),
       ("I've seen {v} live four times.", "{v} is the band I always come back to."),
       ("I'm over {old}, {new} is my favourite band now.", "My favourite band used to be {old}, now it's {new}."),
       ("These days it's all {new} for me, I hardly play {old}.", "{new} has replaced {old} as the band I play most."),
       ("What is {n}'s favourite band?", "Which band does {n} listen to most now?"),
       ("What was {n}'s favourite band before?", "Which band did {n} use to like most?")),
    _k("favourite colour", "blue|green|red|yellow|purple|orange", "teal|maroon|navy|mustard|lilac|turquoise",
       ("My favourite colour is {v}.", "I love the colour {v}, it's my favourite."),
       ("I paint everything {v}, it's my colour.", "Everything I own is {v}."),
       ("My favourite colour is {new} now, not {old}.", "I'm over {old}; {new} is my favourite colour now."),
       ("I repainted the room {new}; I'm tired of {old}.", "These days I pick {new} over {old} every time."),
       ("What is {n}'s favourite colour?", "Which colour does {n} like most now?"),
       ("What was {n}'s favourite colour before?", "Which colour did {n} use to like?")),
    _k("hobby", "running|painting|knitting|baking|gardening|surfing", "climbing|pottery|sketching|fishing|kayaking|chess",
       ("I go {v} every weekend, it clears my head.", "My big hobby is {v}."),
       ("I spend my free evenings {v}.", "I took up {v} a couple of years ago."),
       ("I gave up {old}, my knees hated it; I do {new} now.", "I quit {old} last month and took up {new} instead."),
       ("{old} isn't my thing any more, I've started {new}.", "I dropped {old} completely; my new hobby is {new}."),
       ("What is {n}'s hobby?", "What does {n} do in their free time now?"),
       ("What hobby did {n} have before?", "What did {n} use to do in their free time?")),
    _k("language", "Spanish|Japanese|German|Italian|Korean|French", "Portuguese|Mandarin|Dutch|Arabic|Swedish|Greek",
       ("I'm learning {v}, two lessons a week.", "I've started learning {v} on an app."),
       ("My {v} classes are on Tuesdays.", "I'm studying {v} so I can travel more."),
       ("I stopped learning {old}, I'm learning {new} now.", "I gave up on {old}; I switched to {new} lessons."),
       ("I've put {old} aside and I'm taking {new} classes now.", "No more {old} for me, I'm studying {new} instead."),
       ("Which language is {n} learning?", "What language is {n} studying now?"),
       ("Which language was {n} learning before?", "What language did {n} use to study?")),
    _k("sport", "tennis|squash|basketball|volleyball|badminton|football", "rugby|hockey|golf|cricket|table tennis|baseball",
       ("I play {v} on weekends at the club.", "I've been playing {v} every Saturday."),
       ("Saturdays are for {v} with my team.", "I joined a {v} club last year."),
       ("I don't play {old} any more, I switched to {new}.", "I quit {old} and started playing {new} on weekends."),
       ("These days I play {new} instead of {old}.", "I left the {old} club; I'm on a {new} team now."),
       ("What sport does {n} play on weekends?", "Which sport does {n} play now?"),
       ("What sport did {n} play before?", "Which sport did {n} use to play?")),
)  # fmt: skip

#: People's names per half (never a value of any kind).
NAMES = (
    (
        "Ann",
        "Ben",
        "Gia",
        "Carl",
        "Dana",
        "Eli",
        "Fay",
        "Hugo",
        "Ivy",
        "Jon",
        "Kim",
        "Leo",
        "Mia",
        "Ned",
        "Ola",
        "Pam",
        "Quin",
    ),
    (
        "Rosa",
        "Sam",
        "Tia",
        "Umar",
        "Vera",
        "Walt",
        "Xena",
        "Yusuf",
        "Zoe",
        "Abe",
        "Bea",
        "Cyd",
        "Dev",
        "Eva",
        "Finn",
        "Gus",
        "Hal",
    ),
)

#: Chit-chat: (the person's turn, the assistant's reply); turns that state nothing.
CHATTER = (
    ("Hi! How are you today?", "I'm doing well, thanks for asking! How about you?"),
    ("How was your weekend?", "It was quiet, thanks. How was yours?"),
    ("Pretty relaxed, I watched a couple of movies.", "Sounds like a nice way to unwind."),
    ("The weather has been awful this week.", "Rainy weeks can be tiring. Stay dry!"),
    ("Any idea what I should cook tonight?", "How about a simple pasta with tomatoes and basil?"),
    ("I'm so tired, long day.", "Get some rest tonight, you deserve it."),
    ("Did you see the game last night?", "I didn't, but I heard it was close!"),
    ("Can you recommend a good book?", "You might enjoy a mystery novel for the weekend."),
    ("Thanks for the help yesterday!", "You're welcome, happy to help any time."),
    ("Good morning! Coffee time.", "Good morning! Enjoy your cup."),
    ("What do you think about taking a day off?", "A day off now and then is good for you."),
    ("Ugh, Mondays.", "Hang in there, the week will get better."),
)
#: Statements about other people (distractors): (text with {city}, {job}, {car}, {who}).
DISTRACTORS = (
    "My friend {who} lives in {city}, I visit every summer.",
    "My brother works as a {job} in {city}.",
    "My friend {who} just bought a {car}.",
    "My neighbour is a {job}, she works nights.",
)
_CITIES = ("Madrid", "Oslo", "Vienna", "Boston", "Cork", "Turin")
_JOBS = ("dentist", "firefighter", "journalist", "mechanic")
_CARS = ("Jeep Wrangler", "Nissan Leaf", "BMW X5", "Audi A4")
_OTHERS = ("Lena", "Rick", "Tara", "Wes")


@dataclass(frozen=True)
class Story:
    """One generated story: its sessions (lists of messages) and what it asks."""

    id: str
    half: str
    kind: str
    name: str
    #: the values in the order stated (two, or three when it changes back)
    values: tuple[str, ...]
    sessions: tuple[tuple[dict[str, Any], ...], ...]
    #: external ids of the turns that state each value, in order
    statements: tuple[str, ...]
    present: str
    past: str

    @property
    def current(self) -> str:
        return self.values[-1]

    @property
    def previous(self) -> str:
        return self.values[-2]


def stories(halves: tuple[str, ...] = HALVES) -> list[Story]:
    """Every story of ``halves``: ``PER_HALF`` per attribute kind and half, the second of
    each changing back; the same list on every call."""
    rng = random.Random(SEED)
    out = []
    for k, kind in enumerate(KINDS):
        for h, half in enumerate(HALVES):
            for i in range(PER_HALF):
                story = _story(kind, h, i, k, rng)
                if half in halves:
                    out.append(story)
    return out


def _story(kind: Kind, h: int, i: int, k: int, rng: random.Random) -> Story:
    half = HALVES[h]
    name = NAMES[h][k]
    pool = list(kind.values[h])
    rng.shuffle(pool)
    back = i == 1
    values = (pool[0], pool[1], pool[0]) if back else (pool[0], pool[1])
    sid = f"{half}-{k:02d}-{i}"
    start = datetime(2023, 1, 9, 18, tzinfo=timezone.utc) + timedelta(days=7 * k + 3 * i)
    state = rng.choice(kind.state[h]).format(v=values[0])
    said = [state]
    for n in range(1, len(values)):
        said.append(rng.choice(kind.change[h]).format(old=values[n - 1], new=values[n]))
    sessions: list[tuple[dict[str, Any], ...]] = []
    statements: list[str] = []
    when = start
    for n, line in enumerate(said):
        if n:  # unrelated chatter between each statement and the next
            for _ in range(2):
                when += timedelta(days=rng.randint(9, 20))
                sessions.append(_session(sid, len(sessions), name, when, rng, None))
            when += timedelta(days=rng.randint(30, 60))
        session = _session(sid, len(sessions), name, when, rng, line)
        statements.append(next(m["id"] for m in session if m["content"] == line))
        sessions.append(session)
    present = rng.choice(kind.present).format(n=name)
    past = rng.choice(kind.past).format(n=name, new=values[-1])
    return Story(sid, half, kind.name, name, values, tuple(sessions), tuple(statements),
                 present, past)  # fmt: skip


def _session(
    sid: str, n: int, name: str, when: datetime, rng: random.Random, line: str | None
) -> tuple[dict[str, Any], ...]:
    """One session of ``name`` with the assistant: chit-chat, a distractor now and then, and
    ``line`` (a statement) in the middle when given; each turn a minute after the last."""
    pairs = rng.sample(CHATTER, 3)
    turns: list[tuple[str, str]] = []
    for user, reply in pairs:
        turns += [(name, user), ("assistant", reply)]
    if rng.random() < 0.5:
        other = rng.choice(DISTRACTORS).format(
            who=rng.choice(_OTHERS), city=rng.choice(_CITIES), job=rng.choice(_JOBS),
            car=rng.choice(_CARS),
        )  # fmt: skip
        turns[2:2] = [(name, other), ("assistant", "That's nice to hear!")]
    if line is not None:
        turns[4:4] = [(name, line), ("assistant", "Thanks for telling me, I'll remember that.")]
    return tuple(
        {
            "role": "assistant" if who == "assistant" else "user",
            "name": who,
            "content": text,
            "timestamp": (when + timedelta(minutes=t)).isoformat(),
            "id": f"{sid}-s{n}-t{t}",
        }
        for t, (who, text) in enumerate(turns)
    )
