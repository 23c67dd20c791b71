"""Core benchmark of memstrata: ingest, single add, search latency, memory and disk at N turns.

Run from the repository root, in the project's virtual environment::

    python bench/core.py --embedder e5 --n 10000
    python bench/core.py --embedder use --n 2000 --queries 50 --out use-2k.json
    python bench/core.py --embedder e5 --sizes 10000,100000 --db /tmp/bench-e5.db --out e5.json

The cube holds N synthetic conversation turns (two speakers per session, sessions of about 20
turns, timestamps advancing; text from templates × vocabulary with a fixed seed, so every run
produces the same turns in the same order).  Turns go in through ``MemoryOS.add`` in calls of
``--batch`` messages, split where a session ends, each call with its ``session_id`` (every turn
also records its session in its metadata).  With the default cube settings the tiers consolidate
in the background (``--workers``) while ingest goes on; ``--no-tiers`` keeps every turn in the
working tier, for the core alone.  The text embedded for a turn
is ``"<speaker>: <content>"``, as ``add`` does.

With ``--db PATH`` the database is kept.  Run again with the same path and embedder and the cube
(``bench-<embedder>``) is reused: ingest continues from the turns it already holds, and stops at
once when it holds at least N (so a 100k e5 cube is built once; its ingest figure is then absent).
Without ``--db`` a temporary file is used and removed.  ``--sizes 10000,100000`` grows one cube
through each size in turn, measuring at each.  ``--db postgresql://…`` runs the same on the
PostgreSQL engine (the postgres extra; a database of its own: a cube can be copied into it from a
SQLite one with ``memstrata migrate``), with ``PostgresFloor`` as the floor; there the client's
CPU time leaves out the server's, so compare wall times.  A cube of a million items is grown
from a smaller one with ``bench/grow.py``.

Figures (ms are wall-clock milliseconds; p50/p95 are percentiles over the repetitions):

* ``embedder load`` – loading the model (the first embedding call), excluded from everything else.
* ``raw embed_passages`` – the embedder alone: ``embed_passages`` on the first ``--raw-sample``
  texts ingested, chunk by chunk, each chunk timed just before its own ``add`` call (so both see
  the same machine load);
  the note gives ``add``'s speed on those same chunks.  Passages/s, the ceiling for ingest.  (With
  nothing to ingest, the first ``--raw-sample`` turns of the stream are embedded alone.)
* ``ingest`` – turns/s of ``add`` over the turns added to reach N (embedding, validation and a
  durable SQLite transaction per call: items, full-text index, vectors, version, event).
* ``consolidation left`` – seconds ``wait()`` takes right after the last ``add``: the background
  consolidation (working → mid, segments, promotion) still queued.  Small and independent of N
  means the tiers keep up with ingest; the note counts items by tier and type at that point.
* ``first search`` – the first ``search`` on a freshly opened ``MemoryOS``: it reads every vector of
  the cube into the in-memory mirror (what the first search after a restart pays).
* ``search`` – ``search(top_k=10)`` over ``--queries`` synthetic questions after that warm-up:
  query embedding, BM25 (FTS5) and exact dense search, RRF fusion, fetching the hits.
* ``query embedding`` – the model's ``embed_query`` alone on each question, right after its
  search (``embed_query_uncached``: the embedder remembers the last 1,024 queries, and the
  search has just embedded this one).
* ``search w/o embedding`` – each search again, right after: the text it embeds is then in the
  embedder's query cache (measured directly, not by subtraction).
* ``stage …`` – where the searches without embedding spent their time: the mean wall and CPU
  milliseconds per search of each stage of ``retrieval.stages`` (``/metrics`` shows the same);
  JSON ``stages``.  The search without embedding is our own work: JSON ``own_p50_ms`` and
  ``own_p95_ms`` (the same figures as ``search_no_embed_p50_ms``/``…p95_ms``).
* ``floor`` – what any search must do at least, measured right after each search without
  embedding on the same question (so both see the same load; ``Floor``): the FTS5 match of the
  terms the keyword channel keeps, BM25-ordered, the candidate width; the dense query alone (the
  HNSW graph's search when the cube's mirror has its index attached, else the exact product
  and top candidates); a primary-key fetch of the returned hits' rows.  JSON ``floor_p50_ms``
  (p50 of the per-question sums), its parts, and ``own_over_floor_p50`` (p50 of own / floor
  per question).  Beside each, the CPU time of the calling thread (``own_cpu_p50_ms``,
  ``floor_cpu_p50_ms``, ``own_over_floor_cpu_p50``): on a machine shared with other work the
  wall clock of a few-millisecond call mostly measures waiting for a core, its CPU time not.
* ``plain RRF search`` – right after the floor, the same question through the two channels,
  fused, and the first ten items fetched, nothing else (``plain_search``; JSON
  ``plain_p50_ms``, ``plain_cpu_p50_ms``): own work less the plain search is what the ranking
  after fusion (neighbours, feedback, speakers, time, agreement, parts) costs.
* ``add 1 turn`` – ``add`` of a single message (embedding included), ``--adds`` times, after the
  searches; these turns stay in the cube (the next size counts them).
* ``index build/extend`` – from ``vector_index_min_items`` turns (20,000): seconds of
  ``build_vector_index`` on a freshly opened store before the searches (reading the cube's
  vectors included), so that they all go through a current approximate index; after a run's
  own ingest the background task has usually built it already ("0 vectors taken in").
* ``w/o embedding p50/p95, index`` and ``…, exact scan`` – each question searched again through
  the index and with it off (``vector_index_min_items`` 0), back to back, its query vector in
  the embedder's cache: the two differ by the dense channel alone.
* ``dense recall@10 vs exact`` – the dense channel's top 10 through the index against the exact
  scan on the same query vectors; a hit counts as found when its exact score is at least the
  exact 10th score (the stream repeats turns, so many vectors tie).
* ``peak RSS`` – ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` so far in the process, in MB.
* ``db file`` – the database file plus its WAL, in MB.

Timings are wall-clock and sensitive to other load on the machine (the local embedders use
``embed_threads`` threads, default 2; ``--threads`` overrides it); run on an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import resource
import sqlite3
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from itertools import groupby, islice
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from memstrata.config import Settings
from memstrata.embed import EMBEDDERS, make_embedder
from memstrata.errors import AlreadyExists
from memstrata.filters import Filters
from memstrata.memory.system import MemoryOS
from memstrata.retrieval.fusion import reciprocal_rank_fusion
from memstrata.retrieval.stages import CLOCK, Timings
from memstrata.store.engines import is_postgres
from memstrata.text import any_of, cube_prefix

SEED = 20240611
USER = "bench"
TOP_K = 10
SESSION_TURNS = 20
WARM_UP = "Where did Caroline go hiking?"

Message = dict[str, Any]
T = TypeVar("T")
P = ParamSpec("P")

# -- synthetic conversations -----------------------------------------------------------------

PEOPLE = (
    "Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Audrey",
    "Andrew", "Deborah", "Evan", "Sam", "Calvin", "Dave", "Priya", "Kenji", "Lucia", "Omar",
    "Fatima", "Lars", "Ingrid", "Mateo", "Chloe", "Hassan", "Yuki", "Aisha", "Pedro", "Nina",
    "Oliver", "Zoe", "Rafael", "Hana", "Tomas", "Leila", "Marco", "Sofia", "Ben", "Amara",
)  # fmt: skip
PAIRS = tuple((PEOPLE[i], PEOPLE[i + 1]) for i in range(0, 16, 2))
PLACES = (
    "Lisbon", "Kyoto", "Lake Tahoe", "the Grand Canyon", "Barcelona", "Reykjavik", "Nairobi",
    "Vancouver", "the farmers market", "Central Park", "the climbing gym", "Yosemite", "Prague",
    "the public library", "Cape Town", "Seoul", "the community center", "Banff", "Marrakech",
    "the beach", "Buenos Aires", "Edinburgh", "the art museum", "Oaxaca", "Hanoi", "Dublin",
    "the old harbour", "Santorini", "Montreal", "the botanical garden", "Istanbul", "Queenstown",
)  # fmt: skip
ACTIVITIES = (
    "hiking", "pottery", "painting", "running a half marathon", "camping", "baking sourdough",
    "learning the guitar", "swimming", "rock climbing", "volunteering at the shelter",
    "kayaking", "writing poetry", "birdwatching", "salsa dancing", "gardening", "photography",
    "playing chess", "cycling", "knitting", "learning Japanese", "surfing", "woodworking",
    "skiing", "yoga", "fishing", "making candles", "stand-up comedy", "sketching portraits",
)  # fmt: skip
FOODS = (
    "ramen", "tacos", "pad thai", "lasagna", "sushi", "falafel", "pho", "paella", "dumplings",
    "curry", "pierogi", "shakshuka", "blueberry pie", "banana bread", "croissants", "kimchi stew",
)  # fmt: skip
GENRES = (
    "jazz", "indie folk", "classical music", "hip hop", "country", "techno", "bossa nova",
    "punk rock", "opera", "k-pop", "the blues", "reggae",
)  # fmt: skip
PETS = (
    "a golden retriever", "two cats", "a parrot", "a rescue greyhound", "a turtle",
    "a rabbit named Clover", "a corgi", "goldfish", "a bearded dragon", "a horse",
)  # fmt: skip
JOBS = (
    "nurse", "software engineer", "teacher", "counselor", "chef", "architect", "photographer",
    "social worker", "accountant", "musician", "veterinarian", "librarian", "carpenter",
)  # fmt: skip
RELATIVES = (
    "sister", "brother", "mom", "dad", "grandmother", "cousin", "aunt", "uncle", "best friend",
    "husband", "wife", "kids", "daughter", "son", "roommate", "neighbour",
)  # fmt: skip
WHEN = (
    "last weekend", "yesterday", "last Friday", "two weeks ago", "this morning", "last summer",
    "in May", "over the holidays", "on my birthday", "last month", "a few days ago",
    "on Sunday", "back in March", "earlier this year",
)  # fmt: skip
FEELINGS = (
    "thrilled", "exhausted", "so proud", "a bit nervous", "really relaxed", "inspired",
    "overwhelmed", "grateful", "excited", "nostalgic", "happy", "calm",
)  # fmt: skip
BOOKS = (
    "Becoming", "Dune", "The Hobbit", "Educated", "Little Women", "Sapiens", "Circe",
    "The Alchemist", "Normal People", "Pachinko", "Atomic Habits", "Beloved",
)  # fmt: skip

TEMPLATES = (
    "I tried {activity} near {place} {when} with my {relative}, and I felt {feeling}.",
    "{when}, {other} and I tried {activity} for the first time. It was harder than it looks!",
    "I've been really into {activity} lately. It keeps me sane after work.",
    "My {relative} just got {pet}, so our weekends are pretty chaotic now.",
    "Honestly, {food} is my comfort food. I could eat it every day.",
    "We finally booked a trip to {place}! We leave in {month}.",
    "I started a new job as a {job} {when}. I'm {feeling} about it.",
    "Did you ever go to {place}? I keep hearing good things about it.",
    "I'm reading {book} right now. Have you read it?",
    "{other} recommended {book} to me and I couldn't put it down.",
    "I've been listening to a lot of {genre} these days, it's perfect for {activity}.",
    "That sounds amazing! How long have you been doing {activity}?",
    "I remember when we went to {place} together, we ate so much {food}.",
    "My {relative} turned {age} {when}, we threw a party at {place}.",
    "I'm thinking about signing up for a {activity} class on Tuesdays.",
    "It's been a tough week. My {relative} was sick, so I stayed home a lot.",
    "Guess what, I adopted {pet} {when}! I'm {feeling}.",
    "We made homemade {food} for dinner {when}, the recipe came from my {relative}.",
    "I'd love to visit {place} someday, it's been on my list for years.",
    "Thanks for asking! I'm doing well, just busy with {activity} and work.",
    "Are you still working as a {job}? You used to love it.",
    "I volunteered at {place} {when}, helping kids with reading.",
    "I finished my first painting of {place} {when}, I'm {feeling} with how it turned out.",
    "My favourite band plays {genre}; I saw them live in {place} {when}.",
    "Let's go {activity} together when you're back from {place}.",
    "I ran into {other} at {place} {when}, we hadn't talked in ages.",
    "Wow, {pet}? That's a lot of work but so worth it.",
    "I've decided to go back to school to become a {job}.",
    "We're celebrating our {age}th anniversary in {place} next {month}.",
    "I can't believe it's been a year since we moved to {place}.",
    "That's so kind of you. Tell your {relative} I said hi!",
    "I have been saving up for a trip to {place} to go {activity}.",
)
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

QUESTIONS = (
    "What did {name} do at {place}?",
    "When did {name} go {activity}?",
    "Which book is {name} reading?",
    "What pet does {name}'s {relative} have?",
    "Where is {name} planning to travel?",
    "What is {name}'s favourite food?",
    "What job did {name} start?",
    "Who went {activity} with {name}?",
    "What music does {name} listen to?",
    "How did {name} feel about {activity}?",
    "Has {name} ever been to {place}?",
    "What happened to {name}'s {relative}?",
    "When did {name} adopt a pet?",
    "Who recommended {book}?",
    "What class is {name} signing up for?",
)


def _fill(rng: random.Random, template: str, speaker: str) -> str:
    values = {
        "activity": rng.choice(ACTIVITIES),
        "place": rng.choice(PLACES),
        "when": rng.choice(WHEN),
        "relative": rng.choice(RELATIVES),
        "feeling": rng.choice(FEELINGS),
        "other": rng.choice([p for p in PEOPLE if p != speaker][:24]),
        "pet": rng.choice(PETS),
        "food": rng.choice(FOODS),
        "month": rng.choice(MONTHS),
        "job": rng.choice(JOBS),
        "book": rng.choice(BOOKS),
        "genre": rng.choice(GENRES),
        "age": str(rng.randint(3, 60)),
        "name": rng.choice(PEOPLE[:16]),
    }
    text = template.format(**values)
    return text[0].upper() + text[1:]


def conversation(seed: int = SEED) -> Iterator[Message]:
    """An endless, deterministic stream of chat messages for ``MemoryOS.add``.

    Sessions of 16–24 turns between one of eight pairs of speakers, alternating; sessions start 1–4
    days apart and turns 20 s – 4 min apart.  About one turn in four joins two sentences.
    """
    rng = random.Random(seed)
    clock = datetime(2023, 1, 2, 9, 0, tzinfo=timezone.utc)
    session = 0
    while True:
        session += 1
        pair = rng.choice(PAIRS)
        clock += timedelta(days=rng.randint(1, 4), minutes=rng.randint(0, 600))
        for turn in range(rng.randint(SESSION_TURNS - 4, SESSION_TURNS + 4)):
            speaker = pair[turn % 2]
            text = _fill(rng, rng.choice(TEMPLATES), speaker)
            if rng.random() < 0.25:
                text += " " + _fill(rng, rng.choice(TEMPLATES), speaker)
            clock += timedelta(seconds=rng.randint(20, 240))
            yield {
                "role": "user",
                "name": speaker,
                "content": text,
                "timestamp": clock.isoformat(),
                "metadata": {"session": f"s{session:06d}"},
            }


def questions(count: int, seed: int = SEED + 1) -> list[str]:
    """``count`` deterministic questions about the people, places and events of the stream."""
    rng = random.Random(seed)
    return [_fill(rng, rng.choice(QUESTIONS), "") for _ in range(count)]


def passage_text(message: Message) -> str:
    """What ``add`` embeds for a message (``embedding_text``: speaker-prefixed content)."""
    return f"{message['name']}: {message['content']}"


# -- measurement helpers ---------------------------------------------------------------------


def timed(fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> float:
    """Milliseconds one call ``fn(*args, **kwargs)`` takes."""
    start = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000


def timed_each(fn: Callable[[T], object], values: Iterable[T]) -> list[float]:
    """Milliseconds each call ``fn(value)`` takes, in order."""
    times: list[float] = []
    for value in values:
        start = time.perf_counter()
        fn(value)
        times.append((time.perf_counter() - start) * 1000)
    return times


def pct(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def db_size_mb(path: str) -> float:
    """The database file plus its write-ahead log, in MB (PostgreSQL: the whole database)."""
    if is_postgres(path):
        with _pg(path) as conn:
            return (
                float(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
                / 2**20
            )
    files = [Path(path), Path(path + "-wal")]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


def cube_turns(path: str, cube_id: str) -> int:
    """How many items the cube holds (0 when the file or the cube does not exist yet)."""
    if is_postgres(path):
        with _pg(path) as conn:
            if conn.execute("SELECT to_regclass('items')").fetchone()[0] is None:
                return 0
            sql = "SELECT count(*) FROM items WHERE cube_id = %s"
            return int(conn.execute(sql, (cube_id,)).fetchone()[0])
    if not Path(path).exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT count(*) FROM items WHERE cube_id = ?", (cube_id,)).fetchone()
    except sqlite3.OperationalError:
        return 0  # not initialised yet
    finally:
        conn.close()
    return int(row[0])


def _pg(address: str) -> Any:
    """A psycopg connection to ``address`` (autocommit: each read its own statement)."""
    import psycopg  # the postgres extra; only a PostgreSQL --db needs it

    return psycopg.connect(address, autocommit=True)


# -- the benchmark ---------------------------------------------------------------------------


@dataclass
class Row:
    size: str
    metric: str
    value: float | int | str | None
    unit: str = ""
    note: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace, db: str) -> None:
        self.args = args
        self.db = db
        self.cube_id = f"bench-{args.embedder}"
        overrides: dict[str, Any] = {"db": db, "embedder": args.embedder, "workers": args.workers}
        if args.threads is not None:
            overrides["embed_threads"] = args.threads
        self.settings = Settings.load(**overrides)
        self.embedder = make_embedder(args.embedder, self.settings)
        if args.passage_cache:
            reuse_passages(self.embedder, args.passage_cache, args.cache_noise)
        self.stream = conversation()
        self.held = cube_turns(db, self.cube_id)
        self.rows: list[Row] = []
        self.raw_n, self.raw_s, self.paired_s = 0, 0.0, 0.0
        self.result: dict[str, Any] = {
            "embedder": args.embedder,
            "model_id": self.embedder.model_id,
            "dim": self.embedder.dim,
            "embed_threads": self.settings.embed_threads,
            "embed_batch_size": self.settings.embed_batch_size,
            "batch": args.batch,
            "queries": args.queries,
            "top_k": TOP_K,
            "adds": args.adds,
            "seed": SEED,
            "db": db if args.db else None,
            "reused_turns": self.held,
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "processor": platform.processor() or platform.machine(),
                "python": platform.python_version(),
            },
            "sizes": [],
        }

    def row(
        self,
        size: str,
        metric: str,
        value: float | int | str | None,
        unit: str = "",
        note: str = "",
    ) -> None:
        item = Row(size, metric, value, unit, note)
        self.rows.append(item)
        print(format_row(item), flush=True)

    def open(self) -> MemoryOS:
        """A fresh ``MemoryOS`` (new store, so a cold vector mirror) sharing the loaded embedder."""
        return MemoryOS.open(self.db, embedder=self.embedder, settings=self.settings)

    def run(self) -> dict[str, Any]:
        load_ms = timed(self.embedder.embed_passages, ["warm-up"])
        self.embedder.embed_query("warm-up")
        self.result["embedder_load_s"] = load_ms / 1000
        self.row("-", "embedder load", round(load_ms / 1000, 2), "s", self.embedder.model_id)
        with self.open() as mos:
            with contextlib.suppress(AlreadyExists):
                mos.create_user(USER)
            if mos.store.get_cube(self.cube_id) is None:
                tiers = (
                    {"working_capacity": 10_000, "session_idle_hours": 0}
                    if self.args.no_tiers
                    else {}
                )
                mos.create_cube("benchmark", owner=USER, cube_id=self.cube_id, settings=tiers)
        # Skip the turns already stored, so the cube keeps growing along the same stream.
        for _ in islice(self.stream, self.held):
            pass
        for size in self.args.sizes:
            self.measure(size)
        return self.result

    def report_raw(self) -> None:
        """Report the raw embedding speed, measuring it alone first if no ingest paired it."""
        if not self.raw_n:
            texts = [passage_text(m) for m in islice(conversation(), self.args.raw_sample)]
            for i in range(0, len(texts), self.args.batch):
                chunk = texts[i : i + self.args.batch]
                self.raw_s += timed(self.embedder.embed_passages, chunk) / 1000
                self.raw_n += len(chunk)
        raw = {"texts": self.raw_n, "seconds": self.raw_s, "per_s": self.raw_n / self.raw_s}
        note = f"{self.raw_n} texts, chunks of {self.args.batch}"
        if self.paired_s:
            raw["paired_ingest_per_s"] = self.raw_n / self.paired_s
            note += f"; add on the same chunks: {raw['paired_ingest_per_s']:.1f} turns/s"
        self.result["raw_embed"] = raw
        self.row("-", "raw embed_passages", round(raw["per_s"], 1), "passages/s", note)

    def ingest(self, mos: MemoryOS, target: int) -> dict[str, Any]:
        """Add turns up to ``target``; time only the ``add`` calls.

        The first ``--raw-sample`` texts are also embedded alone, just before their ``add`` call,
        so raw and ingest speeds are measured side by side under the same machine load.
        """
        todo = max(0, target - self.held)
        if not todo:
            return {"ingested": 0, "ingest_s": None, "ingest_turns_per_s": None}
        if self.args.passage_cache:
            # Vectors come from the cache: the cube is built, but no ingest speed is measured.
            self.raw_n = self.args.raw_sample

        batch = self.args.batch
        step = max(batch, (todo // 10) // batch * batch)
        done, seconds = 0, 0.0
        while done < todo:
            messages = list(islice(self.stream, min(batch, todo - done)))
            raw = self.raw_n < self.args.raw_sample
            if raw:
                texts = [passage_text(m) for m in messages]
                self.raw_s += timed(self.embedder.embed_passages, texts) / 1000
                self.raw_n += len(texts)
            took = 0.0
            for session, group in groupby(messages, key=lambda m: m["metadata"]["session"]):
                chunk = list(group)
                took += timed(mos.add, chunk, user_id=USER, cube_id=self.cube_id,
                              session_id=session) / 1000  # fmt: skip
            seconds += took
            if raw:
                self.paired_s += took
            done += len(messages)
            if done % step == 0 and done < todo:
                print(
                    f"  … {self.held + done}/{target} turns, {done / seconds:.1f} turns/s",
                    file=sys.stderr,
                    flush=True,
                )
        self.held += todo
        return {"ingested": todo, "ingest_s": seconds, "ingest_turns_per_s": todo / seconds}

    def measure(self, target: int) -> None:
        size = str(target)
        with self.open() as mos:
            figures = self.ingest(mos, target)
            # The consolidation still queued when ingest stops: with the tiers keeping up it
            # drains in about one task's time; a backlog grows with N.
            start = time.perf_counter()
            mos.wait()
            figures["drain_s"] = time.perf_counter() - start
            figures["tiers"] = mos.stats(user_id=USER, cube_id=self.cube_id)[self.cube_id]["items"]
        if "raw_embed" not in self.result and not self.args.passage_cache:
            self.report_raw()
        if figures["ingested"] and self.args.passage_cache:
            figures["ingest_turns_per_s"] = None
            self.row(size, "ingest", None, "turns/s", "vectors from --passage-cache: not timed")
        elif figures["ingested"]:
            self.row(
                size,
                "ingest",
                round(figures["ingest_turns_per_s"], 1),
                "turns/s",
                f"{figures['ingested']} turns in {figures['ingest_s']:.1f} s, "
                f"batch {self.args.batch}",
            )
        else:
            self.row(size, "ingest", None, "turns/s", f"reused: cube holds {self.held} turns")
        tiers = ", ".join(f"{k} {v}" for k, v in sorted(figures["tiers"].items()))
        self.row(size, "consolidation left", round(figures["drain_s"], 2), "s", tiers)
        figures["turns"] = self.held
        asked = questions(self.args.queries)
        scope = [self.cube_id]
        # SQLite's own approximate index; PostgreSQL keeps its HNSW index itself.
        index_min = 0 if is_postgres(self.db) else self.settings.vector_index_min_items
        figures["vector_index_min_items"] = index_min
        if 0 < index_min <= self.held:
            # What the background task does after adds, timed here so that the searches below
            # all go through a current index (extending one already saved costs far less).
            with self.open() as mos:
                start = time.perf_counter()
                indexed = mos.store.build_vector_index(self.cube_id)
                figures["index_build_s"] = time.perf_counter() - start
            self.row(size, "index build/extend", round(figures["index_build_s"], 2), "s",
                     f"{indexed} vectors taken in")  # fmt: skip

        with self.open() as mos:  # a new store: the first search loads the whole vector mirror
            start = time.perf_counter()
            hits = mos.search(WARM_UP, user_id=USER, cube_ids=scope, top_k=TOP_K)
            first_ms = (time.perf_counter() - start) * 1000
            if not hits:
                raise SystemExit("the warm-up search found nothing: is the cube empty?")
            # Per question, back to back (so all three see the same machine load): the search,
            # the query embedding alone (the model, not the query cache), and the search again:
            # the text it embeds (the question, its named speakers said as "they") is then in
            # the embedder's query cache, so the second search is the search without embedding.
            search_ms, embed_ms, bare_ms = [], [], []
            uncached = getattr(self.embedder, "embed_query_uncached", self.embedder.embed_query)
            for q in asked:
                search_ms.append(timed(mos.search, q, user_id=USER, cube_ids=scope, top_k=TOP_K))
                start = time.perf_counter()
                uncached(q)
                embed_ms.append((time.perf_counter() - start) * 1000)
            # Own work and the floor, question by question back to back (the same load): the
            # search with its query vector cached, then the floor's three reads alone.
            floor = make_floor(mos, self.db, self.cube_id, self.settings)
            floors: list[tuple[float, ...]] = []
            own_cpu, floor_cpu, plain_ms, plain_cpu = [], [], [], []
            stages_before = CLOCK.snapshot()
            with floor.one_blas_thread():
                for q in asked:
                    start, cpu = time.perf_counter(), time.thread_time()
                    found = mos.search(q, user_id=USER, cube_ids=scope, top_k=TOP_K)
                    bare_ms.append((time.perf_counter() - start) * 1000)
                    own_cpu.append((time.thread_time() - cpu) * 1000)
                    asked_floor = floor.prepare(q, [h.item.id for h in found])
                    cpu = time.thread_time()
                    floors.append(floor.measure(*asked_floor))
                    floor_cpu.append((time.thread_time() - cpu) * 1000)
                    vector = self.embedder.embed_query(q)  # in the cache from now on
                    start, cpu = time.perf_counter(), time.thread_time()
                    plain_search(mos, q, vector, scope, self.settings)
                    plain_ms.append((time.perf_counter() - start) * 1000)
                    plain_cpu.append((time.thread_time() - cpu) * 1000)
            stages = stage_means(stages_before, CLOCK.snapshot(), len(asked))
            floor.close()
            exact = self.exact_scan(asked, scope) if 0 < index_min <= self.held else None
            add_ms = timed_each(
                lambda m: mos.add([m], user_id=USER, cube_id=self.cube_id),
                list(islice(self.stream, self.args.adds)),
            )
            self.held += len(add_ms)

        figures.update(
            first_search_ms=first_ms,
            search_p50_ms=pct(search_ms, 50),
            search_p95_ms=pct(search_ms, 95),
            embed_query_p50_ms=pct(embed_ms, 50),
            embed_query_p95_ms=pct(embed_ms, 95),
            search_no_embed_stages_ms=stages,
            search_no_embed_p50_ms=pct(bare_ms, 50),
            search_no_embed_p95_ms=pct(bare_ms, 95),
            own_p50_ms=pct(bare_ms, 50),
            own_p95_ms=pct(bare_ms, 95),
            stages={k: {"wall_ms": w, "cpu_ms": c} for k, (w, c) in stages.items()},
            **floor_figures(floors, bare_ms, floor.dense_kind),
            own_cpu_p50_ms=pct(own_cpu, 50),
            plain_p50_ms=pct(plain_ms, 50),
            plain_cpu_p50_ms=pct(plain_cpu, 50),
            floor_cpu_p50_ms=pct(floor_cpu, 50),
            own_over_floor_cpu_p50=pct(
                [o / f for o, f in zip(own_cpu, floor_cpu, strict=True)], 50
            ),
            add_one_p50_ms=pct(add_ms, 50) if add_ms else None,
            add_one_p95_ms=pct(add_ms, 95) if add_ms else None,
            peak_rss_mb=peak_rss_mb(),
            db_mb=db_size_mb(self.db),
        )
        if exact is not None:
            figures.update(exact)
        self.result["sizes"].append(figures)
        turns = f"{figures['turns']} turns"
        self.row(size, "first search (cold mirror)", round(first_ms, 1), "ms", turns)
        n_q = f"{len(asked)} queries, top_k {TOP_K}"
        self.row(size, "search p50", round(figures["search_p50_ms"], 2), "ms", n_q)
        self.row(size, "search p95", round(figures["search_p95_ms"], 2), "ms", n_q)
        self.row(size, "query embedding p50", round(figures["embed_query_p50_ms"], 2), "ms")
        self.row(size, "query embedding p95", round(figures["embed_query_p95_ms"], 2), "ms")
        self.row(
            size, "search w/o embedding p50", round(figures["search_no_embed_p50_ms"], 2), "ms"
        )
        self.row(
            size, "search w/o embedding p95", round(figures["search_no_embed_p95_ms"], 2), "ms"
        )
        for stage, (wall, cpu) in stages.items():
            self.row(size, f"  stage {stage}", round(wall, 2), "ms", f"mean; CPU {cpu:.2f} ms")
        self.row(size, "floor p50", round(figures["floor_p50_ms"], 3), "ms",
                 f"{floor.keyword_kind} {figures['floor_fts_p50_ms']:.3f} + {floor.dense_kind} "
                 f"dense {figures['floor_dense_p50_ms']:.3f} + fetch "
                 f"{figures['floor_fetch_p50_ms']:.3f}")  # fmt: skip
        self.row(size, "own work / floor (p50)", round(figures["own_over_floor_p50"], 2), "x",
                 "per question, the same run")  # fmt: skip
        self.row(size, "own work CPU p50", round(figures["own_cpu_p50_ms"], 3), "ms",
                 f"floor CPU p50 {figures['floor_cpu_p50_ms']:.3f} ms; per question "
                 f"{figures['own_over_floor_cpu_p50']:.2f}x")  # fmt: skip
        self.row(size, "plain RRF search p50", round(figures["plain_p50_ms"], 3), "ms",
                 f"CPU {figures['plain_cpu_p50_ms']:.3f} ms: two channels fused, top {TOP_K} "
                 "fetched, nothing else")  # fmt: skip
        if add_ms:
            n_a = f"{len(add_ms)} adds"
            self.row(size, "add 1 turn p50", round(figures["add_one_p50_ms"], 2), "ms", n_a)
            self.row(size, "add 1 turn p95", round(figures["add_one_p95_ms"], 2), "ms", n_a)
        if exact is not None:
            for name, key in (("index", "indexed"), ("exact scan", "exact")):
                for p in (50, 95):
                    value = round(exact[f"{key}_no_embed_p{p}_ms"], 2)
                    self.row(size, f"w/o embedding p{p}, {name}", value, "ms",
                             "the same queries back to back" if key == "exact" else "")  # fmt: skip
            self.row(size, "dense recall@10 vs exact", round(exact["dense_recall_at_10"], 4), "",
                     "ties with the 10th score count as found")  # fmt: skip
        self.row(size, "peak RSS", round(figures["peak_rss_mb"], 1), "MB")
        self.row(size, "db file", round(figures["db_mb"], 1), "MB", "file + WAL")

    def exact_scan(self, asked: list[str], scope: list[str]) -> dict[str, float]:
        """The searches through the approximate index and with it off, question by question
        back to back (p50/p95), and the dense channel's recall@10 through the index against
        the exact scan on the same query vectors.

        Both searches run with the question in the embedder's query cache (it was just asked),
        so the two times differ by the dense channel alone.  Recall counts a hit as found when
        its exact score is at least the exact 10th score (less 1e-6): the benchmark stream
        repeats turns, so many vectors tie, and which of the tied rows an exact scan lists is
        arbitrary.
        """
        plain = replace(self.settings, vector_index_min_items=0)
        with (
            MemoryOS.open(self.db, embedder=self.embedder, settings=plain) as exact,
            self.open() as indexed,
        ):
            for mos in (exact, indexed):
                mos.search(WARM_UP, user_id=USER, cube_ids=scope, top_k=TOP_K)
            exact_ms, indexed_ms, found = [], [], []
            for q in asked:
                indexed_ms.append(
                    timed(indexed.search, q, user_id=USER, cube_ids=scope, top_k=TOP_K)
                )
                exact_ms.append(timed(exact.search, q, user_id=USER, cube_ids=scope, top_k=TOP_K))
                vector = np.asarray(self.embedder.embed_query(q), np.float32)
                got = indexed.store.vector_search(vector, scope, Filters(), TOP_K)
                scores = dict(exact.store.vector_search(vector, scope, Filters(), 10**9))
                tenth = sorted(scores.values(), reverse=True)[TOP_K - 1] - 1e-6
                found.append(sum(scores.get(i, -2.0) >= tenth for i, _ in got) / TOP_K)
        return {
            "indexed_no_embed_p50_ms": pct(indexed_ms, 50),
            "indexed_no_embed_p95_ms": pct(indexed_ms, 95),
            "exact_no_embed_p50_ms": pct(exact_ms, 50),
            "exact_no_embed_p95_ms": pct(exact_ms, 95),
            "dense_recall_at_10": float(np.mean(found)),
        }


class _Floor:
    """What both engines' floors share: the question's kept terms, width and cube prefix."""

    def __init__(self, mos: MemoryOS, cube_id: str, settings: Settings) -> None:
        self.mos = mos
        self.cube_id = cube_id
        self.width = max(settings.search_candidates, 2 * TOP_K)
        self.budget = settings.keyword_max_postings
        self.prefix = cube_prefix(cube_id)

    def terms(self, query: str) -> list[str]:
        """The terms of ``query`` the keyword channel keeps, each with the cube's prefix."""
        kept = self.mos.store.keyword_terms(query, [self.cube_id], max_postings=self.budget)
        return [self.prefix + t for t in kept]


class Floor(_Floor):
    """The floor of one search, measured alone on the same cube: the keyword channel's FTS5
    match (the terms ``keyword_search`` keeps, BM25-ordered, the candidate width), the dense
    query (the approximate index's graph search when the cube's mirror has one attached, else
    the exact matrix-vector product and its top candidates) and a primary-key fetch of the
    returned hits' rows.  Nothing is turned into objects: what any search must read at least.
    """

    keyword_kind = "FTS5"

    def __init__(self, mos: MemoryOS, db: str, cube_id: str, settings: Settings) -> None:
        super().__init__(mos, cube_id, settings)
        self.conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
        store: Any = mos.store
        # The same mirror (and index) the searches use; a bench may look inside the store.
        self.cube = store._vectors.refreshed(cube_id, store._changed_rows)
        self.dense_kind = "HNSW" if self.cube.ann is not None else "exact"

    def one_blas_thread(self) -> Any:
        """BLAS on one thread, as the searches' dense product runs."""
        return ThreadpoolController().limit(limits=1, user_api="blas")

    def prepare(self, query: str, hit_ids: list[str]) -> tuple[str | None, Any, str]:
        """What ``measure`` reads for one question, made before the clock starts: the match
        expression of the kept terms (None without any), the query vector, the hits' ids."""
        terms = self.terms(query)
        vector = np.asarray(self.mos.embedder.embed_query(query), np.float32)
        expression = f"body : {any_of(terms)}" if terms else None
        return expression, vector, json.dumps(hit_ids)

    def measure(self, expression: str | None, vector: Any, ids: str) -> tuple[float, ...]:
        """Milliseconds of the FTS5 match, the dense query and the fetch, for one question."""
        start = time.perf_counter()
        if expression is not None:
            self.conn.execute(
                "SELECT rowid, bm25(items_fts, 1.0, 0.0) AS s FROM items_fts "
                "WHERE items_fts MATCH ? ORDER BY s LIMIT ?",
                (expression, self.width),
            ).fetchall()
        fts = time.perf_counter()
        cube = self.cube
        if cube.ann is not None:
            cube.ann.graph.search(vector, self.width, threads=1)
        else:
            scores = cube.matrix[: cube.n] @ vector
            np.argpartition(-scores, min(self.width, cube.n - 1))[: self.width]
        dense = time.perf_counter()
        self.conn.execute(
            "SELECT * FROM items WHERE id IN (SELECT value FROM json_each(?))", (ids,)
        ).fetchall()
        end = time.perf_counter()
        return ((fts - start) * 1000, (dense - fts) * 1000, (end - dense) * 1000)

    def close(self) -> None:
        self.conn.close()


class PostgresFloor(_Floor):
    """The floor on PostgreSQL, as ``Floor`` on SQLite: the GIN match of the terms
    ``keyword_search`` keeps, ranked by PostgreSQL's own ``ts_rank`` (C; the store computes
    FTS5's BM25 in SQL instead, so both engines rank alike), the pgvector query ordered by
    cosine distance (through the width's HNSW index when there is one, with the store's
    session settings), and a primary-key fetch of the returned hits' rows."""

    keyword_kind = "GIN"

    def __init__(self, mos: MemoryOS, db: str, cube_id: str, settings: Settings) -> None:
        from memstrata.store.postgres.connection import SESSION_SETTINGS
        from memstrata.store.postgres.writes import TS_CONFIG

        super().__init__(mos, cube_id, settings)
        self.dim = mos.embedder.dim
        self.config = TS_CONFIG
        self.conn = _pg(db)
        for statement in SESSION_SETTINGS:
            self.conn.execute(statement)
        index = self.conn.execute("SELECT to_regclass(%s)", (f"items_hnsw_{self.dim}",))
        self.dense_kind = "HNSW" if index.fetchone()[0] is not None else "exact"

    def one_blas_thread(self) -> Any:
        return contextlib.nullcontext()  # the dense query runs in the server

    def prepare(self, query: str, hit_ids: list[str]) -> tuple[str | None, Any, list[str]]:
        """The tsquery of the kept terms (None without any), the query vector, the hits' ids."""
        terms = self.terms(query)
        vector = np.asarray(self.mos.embedder.embed_query(query), np.float32).tolist()
        expression = " | ".join(terms) if terms else None
        return expression, vector, hit_ids

    def measure(self, expression: str | None, vector: Any, ids: list[str]) -> tuple[float, ...]:
        """Milliseconds of the GIN match, the dense query and the fetch, for one question."""
        dim, conn = self.dim, self.conn
        start = time.perf_counter()
        if expression is not None:
            conn.execute(
                f"SELECT id FROM items WHERE tsv @@ to_tsquery('{self.config}', %s) "
                f"AND cube_id = %s ORDER BY ts_rank(tsv, to_tsquery('{self.config}', %s)) DESC "
                "LIMIT %s",
                (expression, self.cube_id, expression, self.width),
            ).fetchall()
        fts = time.perf_counter()
        conn.execute(
            f"SELECT id, (vector::vector({dim})) <=> %s::real[]::vector({dim}) AS d FROM items "
            f"WHERE dim = {dim} AND cube_id = %s ORDER BY d LIMIT %s",
            (vector, self.cube_id, self.width),
        ).fetchall()
        dense = time.perf_counter()
        conn.execute("SELECT * FROM items WHERE id = ANY(%s)", (ids,)).fetchall()
        end = time.perf_counter()
        return ((fts - start) * 1000, (dense - fts) * 1000, (end - dense) * 1000)

    def close(self) -> None:
        self.conn.close()


def make_floor(mos: MemoryOS, db: str, cube_id: str, settings: Settings) -> Any:
    """The floor of ``db``'s engine (``Floor`` or ``PostgresFloor``)."""
    kind = PostgresFloor if is_postgres(db) else Floor
    return kind(mos, db, cube_id, settings)


def plain_search(
    mos: MemoryOS, query: str, vector: Any, scope: list[str], settings: Settings
) -> None:
    """A search with none of the ranking that follows fusion: the two channels as
    ``hybrid_search`` asks them (the same widths, live items), fused by RRF, and the first
    ``TOP_K`` items fetched: no question reading, feedback pass, neighbours, speakers, time,
    agreement or parts.  What the search would cost if it were only BM25 + dense + RRF; against
    ``own`` it shows what the ranking after fusion costs."""
    store, filters = mos.store, Filters()
    width = max(settings.search_candidates, 2 * TOP_K)
    keyword = store.keyword_search(
        query, scope, filters, width, max_postings=settings.keyword_max_postings
    )
    dense = store.vector_search(vector, scope, filters, width)
    fused = reciprocal_rank_fusion(
        {"keyword": keyword, "dense": dense},
        {"keyword": settings.keyword_weight, "dense": settings.dense_weight},
        settings.rrf_k,
    )
    store.get_items([item_id for item_id, _, _ in fused[:TOP_K]], scope)


def floor_figures(
    floors: list[tuple[float, ...]], own_ms: list[float], dense_kind: str
) -> dict[str, Any]:
    """The floor's p50s (its parts and their per-question sum) and own work over the floor,
    question by question (p50 of the ratios)."""
    sums = [sum(f) for f in floors]
    return {
        "floor_p50_ms": pct(sums, 50),
        "floor_p95_ms": pct(sums, 95),
        "floor_fts_p50_ms": pct([f[0] for f in floors], 50),
        "floor_dense_p50_ms": pct([f[1] for f in floors], 50),
        "floor_fetch_p50_ms": pct([f[2] for f in floors], 50),
        "floor_dense": dense_kind,
        "own_over_floor_p50": pct([o / f for o, f in zip(own_ms, sums, strict=True)], 50),
    }


def stage_means(
    before: dict[str, Timings], after: dict[str, Timings], searches: int
) -> dict[str, tuple[float, float]]:
    """Per search stage (``retrieval.stages``), mean wall and CPU ms per search between two
    snapshots of the process's stage clock."""
    return {
        stage: (
            (after[stage].seconds - t.seconds) * 1000 / searches,
            (after[stage].cpu_seconds - t.cpu_seconds) * 1000 / searches,
        )
        for stage, t in before.items()
        if after[stage].count > t.count
    }


def reuse_passages(embedder: Any, cache: Path, noise: float | None = None) -> None:
    """Make ``embedder`` return the vectors ``bench/scale.py --e5`` kept for these texts.

    The cache holds the e5 vectors of the stream's first turns, in order; texts not in it are
    embedded by the model, or with ``noise`` made up: the cached vector of a row picked by the
    text's CRC-32, plus Gaussian noise of that σ per coordinate (seeded by the same CRC),
    normalised (as ``bench/crossover.py`` grows 1M vectors from 100k).  Builds a large cube in
    minutes instead of hours; the ingest figure is then not measured, and a made-up vector's
    ranking means nothing (its cost is a real one's).
    """
    kept = np.load(cache)["vectors"]
    known = {passage_text(m): i for i, m in zip(range(len(kept)), conversation(), strict=False)}
    model = embedder.embed_passages

    def made_up(text: str) -> np.ndarray:
        crc = zlib.crc32(text.encode())
        vector = kept[crc % len(kept)] + np.random.default_rng(crc).normal(0, noise, kept.shape[1])
        return np.asarray(vector / np.linalg.norm(vector), np.float32)

    def embed_passages(texts: Sequence[str]) -> np.ndarray:
        rows = [known.get(t) for t in texts]
        if noise is not None:
            return np.stack([kept[r] if r is not None else made_up(t)
                             for r, t in zip(rows, texts, strict=True)]).astype(np.float32)  # fmt: skip
        if any(r is None for r in rows):
            return np.asarray(model(texts), np.float32)
        return np.asarray(kept[rows], np.float32)

    embedder.embed_passages = embed_passages


def format_row(row: Row) -> str:
    value = "-" if row.value is None else str(row.value)
    return f"{row.size:>7}  {row.metric:<27} {value:>10} {row.unit:<11} {row.note}".rstrip()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="memstrata core benchmark: ingest, add, search, memory, disk at N turns."
    )
    parser.add_argument("--embedder", choices=EMBEDDERS, default="e5")
    parser.add_argument("--n", type=int, default=10000, help="turns in the cube (default 10000)")
    parser.add_argument(
        "--sizes", help="comma-separated sizes to grow one cube through, e.g. 10000,100000"
    )
    parser.add_argument("--db", help="database file to build or reuse (default: a temporary one)")
    parser.add_argument("--batch", type=int, default=64, help="messages per add call")
    parser.add_argument("--queries", type=int, default=200, help="search queries per size")
    parser.add_argument("--adds", type=int, default=100, help="single-turn adds per size")
    parser.add_argument(
        "--raw-sample", type=int, default=2000, help="texts for the raw embed_passages speed"
    )
    parser.add_argument("--threads", type=int, help="embedder threads (default: the setting)")
    parser.add_argument(
        "--workers", type=int, default=1, help="background workers (default 1; 0 runs tasks inline)"
    )
    parser.add_argument(
        "--no-tiers",
        action="store_true",
        help="a new cube keeps every turn in the working tier (no consolidation work)",
    )
    parser.add_argument(
        "--passage-cache",
        type=Path,
        help="e5 vectors of the stream's turns kept by bench/scale.py --e5 (ingest not timed)",
    )
    parser.add_argument(
        "--cache-noise",
        type=float,
        help="with --passage-cache: texts past the cache get a cached vector plus noise of this "
        "sigma instead of the model's (cost figures only: their ranking means nothing)",
    )
    parser.add_argument("--out", help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [args.n]
    if any(s < 1 for s in sizes) or sizes != sorted(set(sizes)):
        parser.error("sizes must be positive and increasing")
    if args.batch < 1 or args.queries < 1 or args.adds < 0 or args.raw_sample < 1:
        parser.error("--batch, --queries and --raw-sample must be positive, --adds at least 0")
    if args.cache_noise is not None and not args.passage_cache:
        parser.error("--cache-noise needs --passage-cache")
    args.sizes = sizes
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as scratch:
        db = args.db or str(Path(scratch) / "bench.db")
        print(f"{'size':>7}  {'metric':<27} {'value':>10} {'unit':<11} note", flush=True)
        result = Bench(args, db).run()
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
