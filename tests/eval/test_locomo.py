"""The LoCoMo harness on a tiny original fixture in LoCoMo's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata.cli import cli
from memstrata.eval import answers, locomo
from memstrata.model import MemoryItem, Source

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "locomo_mini.json"


def test_sessions_keep_dates_speakers_ids_and_captions() -> None:
    (sample,) = locomo.load(FIXTURE)
    got = list(locomo.sessions(sample["conversation"]))
    assert [s for s, _ in got] == ["session_1", "session_2"]  # session_3 has no turns
    first = got[0][1][2]
    assert first["name"] == "Nora" and first["id"] == "D1:3"
    assert first["timestamp"] == "2023-03-03T10:00:00Z"
    assert first["content"].endswith("[shared an image: a photo of a tram on a hilly street]")
    assert locomo.evidence({"evidence": ["D1:2; D2:1", "D"]}) == {"D1:2", "D2:1"}


@pytest.mark.parametrize("tiers", ["--tiers", "--no-tiers"])
def test_eval_locomo_command(tmp_path: Path, tiers: str) -> None:
    out, report = tmp_path / "result.json", tmp_path / "report"
    result = CliRunner().invoke(
        cli,
        ["eval", "locomo", "--data", str(FIXTURE), tiers, "--out", str(out),
         "--report", str(report)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "single-hop" in result.stdout
    assert result.stderr == ""  # no progress bar off a terminal, not even its label
    data = json.loads(out.read_text())
    overall = data["overall"]
    assert overall["questions"] == 4  # category 5 and empty evidence are skipped
    assert len(data["query_ms"]) == 4 and max(data["query_ms"]) >= overall["query_ms_p50"]
    assert json.loads((report / "result.json").read_text())["overall"] == overall
    named = "locomo_mini.json, " + tiers.strip("-").replace("-", " ")  # the run, in the report
    assert named in (report / "index.html").read_text()
    for key in (
        "recall@10",
        "recall@1000tok",
        "recall@2000tok",
        "tokens_per_query",
        "recall_fact@1000tok",
        "recall_fact@2000tok",
        "answer_token_recall@1000tok",
    ):
        assert key in overall  # fmt: skip
    assert overall["recall_fact@1000tok"] >= overall["recall@1000tok"]
    assert set(data["by_category"]) == {"multi-hop", "temporal", "open-domain", "single-hop"}
    # six short turns: every evidence turn fits in 1000 tokens, and the cat's name is there
    assert overall["recall@1000tok"] == 1.0 and overall["recall@20"] == 1.0
    assert data["by_category"]["single-hop"]["answer_in_context"] == 1.0
    assert 0 < overall["tokens_per_query"] <= 1000


def test_not_locomo_data_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    result = CliRunner().invoke(cli, ["eval", "locomo", "--data", str(bad)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "LoCoMo samples" in result.stderr


def test_fact_credit_counts_small_derived_items_only() -> None:
    def item(kind: str, sources: int) -> MemoryItem:
        cited = [Source(item_id=f"t{n}") for n in range(sources)]
        return MemoryItem(id="x", cube_id="c", text="-", type=kind, sources=cited)  # type: ignore[arg-type]

    assert locomo._fact(item("fact", 3)) and locomo._fact(item("profile", 1))
    assert not locomo._fact(item("fact", 4))  # a digest of many turns stands for none of them
    assert not locomo._fact(item("segment", 2))  # a summary never counts


def test_answer_token_recall_counts_content_words() -> None:
    assert answers.token_recall("7 May 2023", "Caroline went on 7 May 2023.") == 1.0
    assert answers.token_recall("the pottery class", "she took a class") == 0.5
    assert answers.token_recall("the", "anything") is None  # no content word to find
