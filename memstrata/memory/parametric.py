"""Parametric memory: a LoRA adapter that has learnt a cube's long-tier facts.

``train`` (``MemoryOS.train_adapter``, and the ``train_adapter`` task) reads the cube's current
long-tier facts, preferences, knowledge and profile attributes, turns each into question/answer
pairs with the offline templates of ``pairs``, fits a LoRA adapter to them on the base model
(``memstrata.llm.adapter``) and stores it as a ``lora`` artifact of the cube: the adapter's
tensors as safetensors (never pickle).  Its fingerprint is the sha256 of the format, the base
model's sha256, the hyper-parameters and the (id, version) of every source item, so the same
facts on the same model are not trained twice; its metadata lists those sources, the
hyper-parameters, the seconds training took, the loss of each epoch and the base model.  Older
``lora`` artifacts of the cube are deleted after a new one is stored.

``answer`` asks the base model questions with no context, through the cube's newest adapter when
it has one (``MemoryOS.generate_with_adapter``; the evaluation ``memstrata eval adapter``).

**Only this server's adapters are loaded** (issue 24, finding 4): ``train`` stores an adapter
sealed (``memory.artifacts.Seal``), and ``adapter`` (what ``answer`` and ``chat`` put on the
model) gives the newest one's bytes only when its MAC verifies over them; one that does not (a
planted or changed file, one made before seals) is deleted, a new training is queued, and the
base model answers alone meanwhile.  An import never brings a ``lora`` artifact in
(``memory.cubes``).

**Templates** (``pairs``): a profile attribute with ``metadata`` ``subject``/``key``/``value``
gives "What is Ann's favourite food?" → "Ann's favourite food is ramen."; a fact, preference or
knowledge item gives one question from the first of ``PATTERNS`` its text matches ("Ann works as a
nurse in Berlin." → "What is Ann's job?"), else the general "What do you know about Ann?" (the
subject is ``metadata["subject"]`` or the text's leading capitalised name; an item without one
is asked "What do you remember?"), and the answer is always the item's text.

**Erasure**: erasing anything in a cube deletes its artifacts, ``lora`` ones included
(``memory.artifacts.forget``): an adapter trained on erased words is erased too, as its KV cache
is; deleting the cube deletes its files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence

from memstrata.filters import Filters
from memstrata.llm import ChatMessage
from memstrata.llm.adapter import QA, CausalLM, LoraSettings, Trained
from memstrata.memcube import Artifact
from memstrata.memory import artifacts
from memstrata.model import MemoryItem
from memstrata.scheduler import Scheduler, Task
from memstrata.store.base import ModelStateStore

KIND = "lora"
#: The format name, first in every fingerprint and in the metadata.
FORMAT = "memstrata-lora/1"
#: Long-tier types an adapter learns.
TYPES = ("fact", "profile", "preference", "knowledge")
#: The most items an adapter learns (the newest): training time grows with them (about 5 s of
#: CPU per item here), and anyone who may write a cube may ask for it.
MAX_ITEMS = 500

_NAME = r"(?P<s>[A-Z][\w-]*(?: [A-Z][\w-]*)?)"
#: (pattern over an item's text, question made from its groups): the first match wins.
PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), question)
    for pattern, question in (
        (rf"^{_NAME} (?:works|is working) as ", "What is {s}'s job?"),
        (rf"^{_NAME} (?:lives|is living) in ", "Where does {s} live?"),
        (rf"^{_NAME} has an? (?P<k>[\w ]+?) (?:called|named) ", "What is the name of {s}'s {k}?"),
        (rf"^{_NAME}'s favou?rite (?P<k>[\w ]+?) (?:is|are) ", "What is {s}'s favourite {k}?"),
        (rf"^{_NAME} (?:is|was) allergic to ", "What is {s} allergic to?"),
        (rf"^{_NAME} (?:is|was) learning ", "What is {s} learning?"),
        (rf"^{_NAME}'s (?P<k>[\w ]+?) (?:is|are) ", "Who is {s}'s {k}?"),
        (rf"^{_NAME} (?:loves|likes|enjoys|is into) ", "What does {s} enjoy?"),
        (rf"^{_NAME} (?:hates|dislikes) ", "What does {s} dislike?"),
    )
)
_LEADING_NAME = re.compile(rf"^{_NAME}\b")


def pairs(items: Sequence[MemoryItem]) -> list[QA]:
    """The training pairs of ``items`` (see "Templates" in the module docstring), in order."""
    found = []
    for item in items:
        text = " ".join(item.text.split())
        if not text:
            continue
        value = item.metadata.get("value")
        subject = _subject(item, text)
        if item.type == "profile" and item.key and value and subject:
            key = item.key.replace("_", " ")
            found.append(QA(f"What is {subject}'s {key}?", f"{subject}'s {key} is {value}."))
        else:
            found.append(QA(_question(text, subject), text))
    return found


def _subject(item: MemoryItem, text: str) -> str | None:
    """Who the item is about: its ``subject`` metadata (capitalised), else a leading name."""
    named = item.metadata.get("subject")
    if isinstance(named, str) and named.strip():
        return " ".join(w[:1].upper() + w[1:] for w in named.split())
    match = _LEADING_NAME.match(text)
    return match.group("s") if match else None


def _question(text: str, subject: str | None) -> str:
    for pattern, question in PATTERNS:
        match = pattern.match(text[:1].upper() + text[1:])
        if match:
            return question.format(**match.groupdict())
    return f"What do you know about {subject}?" if subject else "What do you remember?"


def fingerprint(base: str, items: Sequence[MemoryItem], settings: LoraSettings) -> str:
    """The fingerprint of an adapter of ``items`` on the base model of sha256 ``base``."""
    sources = sorted(f"{i.id}:{i.version}" for i in items)
    text = "\n".join([FORMAT, base, json.dumps(settings.as_dict(), sort_keys=True), *sources])
    return f"{FORMAT}:{hashlib.sha256(text.encode()).hexdigest()}"


class ParametricMemory:
    """Trains and finds a cube's ``lora`` artifact; registers the ``train_adapter``
    task on ``scheduler``.  The base model is loaded on the first training or answer."""

    def __init__(
        self,
        store: ModelStateStore,
        scheduler: Scheduler,
        model_path: str | None = None,
        settings: LoraSettings | None = None,
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self.settings = settings or LoraSettings()
        self._model_path = model_path
        self._model: CausalLM | None = None
        self.seal = artifacts.Seal(store)
        scheduler.register("train_adapter", self._task)

    @property
    def model(self) -> CausalLM:
        """The base model (``ConfigurationError`` when its file is missing)."""
        if self._model is None:
            self._model = CausalLM(self._model_path)
        return self._model

    def sources(self, cube_id: str) -> list[MemoryItem]:
        """The items an adapter of ``cube_id`` learns now: the newest ``MAX_ITEMS`` current
        long-tier ``TYPES``, oldest first."""
        newest = self.store.list_items(
            cube_id, Filters(tiers=("long",), types=TYPES), descending=True, limit=4 * MAX_ITEMS
        )
        return [i for i in newest if i.valid_to is None][:MAX_ITEMS][::-1]

    def train(
        self, cube_id: str, progress: Callable[[int, int], None] | None = None
    ) -> Artifact | None:
        """The cube's adapter for its items now: found by fingerprint or trained and stored;
        the cube's other ``lora`` artifacts are deleted.  None when it has nothing to learn.
        ``progress(n, total)`` hears of the training batches done."""
        items = self.sources(cube_id)
        existing = self.store.artifacts(cube_id, KIND)
        made: Artifact | None = None
        if items:
            wanted = fingerprint(self.model.fingerprint(), items, self.settings)
            made = next(
                (
                    a
                    for a in existing
                    if a.fingerprint == wanted and self.seal.open(cube_id, a) is not None
                ),
                None,
            )  # one that is not sealed is deleted by ``open``, and trained again here
            if made is None:
                trained = self.model.train(pairs(items), self.settings, progress)
                made = self.seal.put(
                    cube_id, KIND, wanted, trained.data, self._metadata(items, trained)
                )
        artifacts.keep_only(self.store, cube_id, existing, made)
        return made

    def current(self, cube_id: str) -> Artifact | None:
        """The cube's newest ``lora`` artifact, or None."""
        found = self.store.artifacts(cube_id, KIND)
        return found[-1] if found else None

    def adapter(self, cube_id: str) -> bytes | None:
        """The bytes of the cube's newest adapter, what the model is given: only when this
        server sealed them.  None when the cube has none, or when its newest is not sealed (it
        is deleted and a new training queued; run inline, it is trained here and used at
        once)."""
        artifact = self.current(cube_id)
        if artifact is None:
            return None
        data = self.seal.open(cube_id, artifact)
        if data is None:
            self.queue(cube_id)  # made again from the cube's own items
            fresh = self.current(cube_id) if self.scheduler.inline else None
            data = None if fresh is None else self.seal.open(cube_id, fresh)
        return data

    def answer(self, cube_id: str, questions: Sequence[str], max_tokens: int = 32) -> list[str]:
        """Greedy answers with no context, through the cube's newest adapter if any (else the
        base model's own)."""
        adapter = self.adapter(cube_id)
        return self.model.answer(questions, adapter, self.settings, max_tokens=max_tokens)

    def chat(self, cube_id: str, messages: Sequence[ChatMessage], max_tokens: int) -> str:
        """The answer to chat ``messages`` by the base model through the cube's newest adapter
        (the base model alone when the cube has none)."""
        adapter = self.adapter(cube_id)
        return self.model.chat(messages, adapter, self.settings, max_tokens=max_tokens)

    def queue(self, cube_id: str) -> str:
        """Queue the cube's training in the background (deduplicated); the task's id."""
        return self.scheduler.submit(
            "train_adapter", {}, cube_id=cube_id, dedupe_key=f"train_adapter:{cube_id}"
        )

    def close(self) -> None:
        """Drop the loaded base model."""
        if self._model is not None:
            self._model.close()

    def _metadata(self, items: Sequence[MemoryItem], trained: Trained) -> dict[str, object]:
        return {
            "format": FORMAT,
            "base_model": self.model.model,
            "base_sha256": self.model.fingerprint(),
            "sources": [[i.id, i.version] for i in items],
            "pairs": len(pairs(items)),
            "hyper": self.settings.as_dict(),
            "train_s": round(trained.seconds, 2),
            "losses": list(trained.losses),
        }

    def _task(self, task: Task) -> None:
        """Task ``train_adapter``: ``train`` for the task's cube (nothing for a cube gone)."""
        if task.cube_id is not None and self.store.get_cube(task.cube_id) is not None:
            self.train(task.cube_id)
