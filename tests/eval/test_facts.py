"""``memstrata eval locomo --facts`` and ``eval fit-facts`` on a two-conversation fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata.cli import cli
from memstrata.eval import facts
from memstrata.model import MemoryItem, Source
from memstrata.reader import worthiness

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "locomo_facts.json"


def test_content_word_f1() -> None:
    a = facts.content_words("Melanie's kids are excited about the summer break!")
    assert a == {"melanie", "kids", "excited", "summer", "break"}
    assert facts.word_f1(
        a, facts.content_words("Melanie is excited about summer")
    ) == pytest.approx(0.75)
    assert facts.word_f1(a, set()) == 0.0


def test_recall_needs_the_same_turn_and_precision_any_observation() -> None:
    note = facts.Observation("Nora", "Nora adopted a grey cat called Pixel.", frozenset({"D1:1"}))

    def item(text: str, turn: str) -> MemoryItem:
        return MemoryItem(id=text, cube_id="c", text=text, tier="long",
                          sources=[Source(item_id=turn)])  # fmt: skip

    external = {"t1": "D1:1", "t2": "D1:2"}
    right = facts.score([item("Nora adopted a grey cat Pixel.", "t1")], external, [note], 0.6)
    assert right == {"observation_recall": 1.0, "precision": 1.0}
    wrong_turn = facts.score([item("Nora adopted a grey cat Pixel.", "t2")], external, [note], 0.6)
    assert wrong_turn == {"observation_recall": 0.0, "precision": 1.0}


def test_eval_locomo_facts_command(tmp_path: Path) -> None:
    out = tmp_path / "facts.json"
    args = ["eval", "locomo", "--data", str(FIXTURE), "--facts", "--out", str(out)]
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "unused.db"), *args])
    assert result.exit_code == 0, result.output
    found = json.loads(out.read_text())
    overall = found["overall"]
    assert overall["observations"] == 8
    assert set(found["by_conversation"]) == {"mini-a", "mini-b"}
    # The quiet first sessions leave the working tier whole, so their notes reach the long tier.
    assert overall["items"] > 0 and overall["observation_recall@0.4"] > 0
    assert overall["unresolved"] == 0.0
    # Session 1 went quiet, so its facts reach the long tier and cover part of its summary.
    assert 0 < found["by_conversation"]["mini-a"]["summary_recall"] <= 1
    assert "summary_f1" in overall and "summary_recall" not in found["by_conversation"]["mini-b"]
    assert "observation_recall@0.4" in result.output


def test_fit_facts_writes_a_model_the_reader_can_load(tmp_path: Path) -> None:
    out = tmp_path / "worthiness.json"
    result = CliRunner().invoke(
        cli, ["eval", "fit-facts", "--data", str(FIXTURE), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    fitted = worthiness.load(out)
    assert fitted.vectors is not None and fitted.vectors.embedder
    provenance = json.loads(out.read_text())["provenance"]
    assert "sha256" in provenance["data"] and provenance["notes"] > 0
