"""``memstrata eval adapter``: what a cube's LoRA adapter taught the model.

A synthetic cube of 50 long-tier facts (``cube_facts``: ten people, each with a job, a city, a
named pet, a hobby and a favourite food, drawn deterministically from fixed lists) is stored in a
fresh database; the base model answers questions about them **closed-book** (no context, greedy,
``MemoryOS.generate_with_adapter``) before and after ``MemoryOS.train_adapter``:

* ``recall_before`` / ``recall_after``: on the questions the adapter was trained on (those the
  offline templates of ``memory.parametric`` make from the facts, e.g. "What is Ann's job?");
* ``recall_before_paraphrased`` / ``recall_after_paraphrased``: on other wordings of the same
  questions, never trained on ("What does Ann do for a living?").

An answer is a **hit** when every content word of the expected value ("nurse", "Lisbon", "Rex",
"ice skating") appears among the answer's words (case and punctuation ignored); recall is the
share of hits.  ``train_s`` is the adapter's training time (in its metadata), ``adapter_bytes``
its file's size.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstrata.embed import fingerprint as embedder_fingerprint
from memstrata.memory.embedding import embed_items
from memstrata.memory.parametric import pairs
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem

_PEOPLE = ("Ann", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiroshi", "Ines", "Jonas")
_JOBS = ("nurse", "plumber", "architect", "baker", "pilot", "dentist", "librarian", "carpenter",
         "chemist", "firefighter")  # fmt: skip
_CITIES = ("Lisbon", "Oslo", "Kyoto", "Quito", "Accra", "Hobart", "Tartu", "Cusco", "Perth",
           "Bergen")  # fmt: skip
_PETS = (("dog", "Rex"), ("cat", "Miso"), ("parrot", "Kiwi"), ("rabbit", "Pip"), ("horse", "Comet"),
         ("turtle", "Shelly"), ("hamster", "Biscuit"), ("dog", "Bolt"), ("cat", "Luna"),
         ("goldfish", "Bubbles"))  # fmt: skip
_HOBBIES = ("chess", "pottery", "surfing", "knitting", "archery", "beekeeping", "rowing", "origami",
            "rock climbing", "ice skating")  # fmt: skip
_FOODS = ("ramen", "paella", "pierogi", "falafel", "sushi", "lasagne", "tacos", "couscous",
          "risotto", "dumplings")  # fmt: skip
_STOP = {"a", "an", "the", "of", "in", "to", "and"}


@dataclass(frozen=True)
class Fact:
    """A synthetic fact: its text, who it is about, the expected value and a paraphrased
    question (the trained question comes from the templates)."""

    text: str
    subject: str
    value: str
    paraphrase: str


def cube_facts() -> list[Fact]:
    """The 50 facts of the synthetic cube, person by person (the same every time)."""
    found = []
    for n, name in enumerate(_PEOPLE):
        job, city = _JOBS[(3 * n) % 10], _CITIES[(7 * n + 2) % 10]
        kind, pet = _PETS[(9 * n + 4) % 10]
        hobby, food = _HOBBIES[(3 * n + 5) % 10], _FOODS[(7 * n + 1) % 10]
        found += [
            Fact(f"{name} works as {_article(job)} {job}.", name, job,
                 f"What does {name} do for a living?"),
            Fact(f"{name} lives in {city}.", name, city, f"Which city is {name}'s home?"),
            Fact(f"{name} has a {kind} called {pet}.", name, pet, f"What is {name}'s {kind} called?"),
            Fact(f"{name} enjoys {hobby}.", name, hobby, f"What is {name}'s hobby?"),
            Fact(f"{name}'s favourite food is {food}.", name, food,
                 f"Which food does {name} like best?"),
        ]  # fmt: skip
    return found


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters and digits), punctuation dropped."""
    return re.findall(r"[^\W_]+", text.lower())


def hit(answer: str, expected: str) -> bool:
    """Whether every content word of ``expected`` is among ``answer``'s words."""
    said = set(words(answer))
    return all(w in said for w in words(expected) if w not in _STOP)


def measure(
    model_path: str | None = None, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """The evaluation's result (see the module docstring), with a few answers as examples."""
    tell = progress or (lambda n, total: None)
    tell(0, 5)
    started = time.perf_counter()
    facts = cube_facts()
    with tempfile.TemporaryDirectory(prefix="memstrata-eval-") as folder:
        path = str(Path(folder) / "m.db")
        with MemoryOS.open(path, workers=0, llm_model_path=model_path) as mos:
            cube_id = _synthetic_cube(mos, facts)
            trained = [qa.question for qa in pairs(_items(mos, cube_id))]
            paraphrased = [f.paraphrase for f in facts]
            ask = _asker(mos, cube_id, tell)
            before, before_para = ask(trained), ask(paraphrased)
            artifact = mos.train_adapter(cube_id, user_id="eval")
            tell(1, 5)
            if artifact is None:
                raise RuntimeError("the synthetic cube gave nothing to train on")
            after, after_para = ask(trained), ask(paraphrased)
    values = [f.value for f in facts]
    return {
        "facts": len(facts),
        "base_model": artifact.metadata["base_model"],
        "hyper": artifact.metadata["hyper"],
        "losses": artifact.metadata["losses"],
        "recall_before": _recall(before, values),
        "recall_before_paraphrased": _recall(before_para, values),
        "recall_after": _recall(after, values),
        "recall_after_paraphrased": _recall(after_para, values),
        "train_s": artifact.metadata["train_s"],
        "adapter_bytes": artifact.size_bytes,
        "total_s": round(time.perf_counter() - started, 1),
        "examples": [
            {
                "question": q,
                "expected": v,
                "before": b,
                "after": a,
                "paraphrase": p,
                "after_paraphrased": ap,
            }
            for q, v, b, a, p, ap in list(
                zip(trained, values, before, after, paraphrased, after_para, strict=True)
            )[::9]
        ],
    }


def table(result: dict[str, Any]) -> list[str]:
    """``result`` as lines of text."""
    return [
        f"{result['facts']} facts, {result['base_model']}, {result['hyper']['epochs']} epochs, "
        f"LoRA r={result['hyper']['rank']}",
        f"recall before {result['recall_before']:.2f}, after {result['recall_after']:.2f} "
        f"(paraphrased: before {result['recall_before_paraphrased']:.2f}, "
        f"after {result['recall_after_paraphrased']:.2f})",
        f"trained in {result['train_s']:.0f} s; adapter {result['adapter_bytes'] / 1e6:.1f} MB",
    ]


def _synthetic_cube(mos: MemoryOS, facts: Sequence[Fact]) -> str:
    """A cube of user ``eval`` holding ``facts`` as long-tier facts; its id."""
    mos.create_user("eval")
    cube_id = mos.create_cube("synthetic facts", owner="eval").cube_id
    items = [
        MemoryItem(id=f"fact-{n:02d}", cube_id=cube_id, text=f.text, tier="long", type="fact",
                   user_id="eval", metadata={"subject": f.subject.lower()})
        for n, f in enumerate(facts)
    ]  # fmt: skip
    mos.store.add_items(items, embed_items(mos.embedder, items), embedder_fingerprint(mos.embedder))
    return cube_id


def _items(mos: MemoryOS, cube_id: str) -> list[MemoryItem]:
    ids = [f"fact-{n:02d}" for n in range(len(_PEOPLE) * 5)]
    items = sorted(mos.store.get_items(ids, [cube_id]), key=lambda i: i.id)
    return items


def _asker(
    mos: MemoryOS, cube_id: str, tell: Callable[[int, int], None]
) -> Callable[[list[str]], list[str]]:
    def ask(questions: list[str]) -> list[str]:
        answers = mos.generate_with_adapter(cube_id, questions, user_id="eval", max_tokens=24)
        tell(1, 5)
        return answers

    return ask


def _recall(answers: Sequence[str], values: Sequence[str]) -> float:
    return round(sum(hit(a, v) for a, v in zip(answers, values, strict=True)) / len(values), 3)
