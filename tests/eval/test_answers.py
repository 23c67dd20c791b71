"""Answer scoring (F1, BLEU-1) and the harness's LLM path against a stand-in OpenAI-compatible
endpoint (pytest-httpserver): the harness's own code runs unchanged down to the HTTP call."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS
from memstrata.cli import cli
from memstrata.eval import answers, locomo
from memstrata.llm import OpenAIChat

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "locomo_mini.json"


def test_normalise_drops_case_punctuation_and_articles() -> None:
    assert answers.normalise("The Grey cat, Pixel!") == ["grey", "cat", "pixel"]


def test_f1_is_token_overlap() -> None:
    assert answers.f1("Pixel", "pixel.") == 1.0
    assert answers.f1("a grey cat called Pixel", "Pixel") == pytest.approx(2 * 0.25 / 1.25)
    assert answers.f1("Lisbon", "Porto") == 0.0
    assert answers.f1("", "Porto") == 0.0 and answers.f1("the", "a") == 1.0


def test_bleu1_is_clipped_precision_with_brevity_penalty() -> None:
    assert answers.bleu1("Pixel", "Pixel") == 1.0
    # clipped: "cat" counted once; longer than the reference, so no penalty
    assert answers.bleu1("cat cat grey", "grey cat") == pytest.approx(2 / 3)
    # shorter than the reference: penalty exp(1 - 3/1)
    assert answers.bleu1("April", "19 April 2023") == pytest.approx(math.exp(-2))
    assert answers.bleu1("", "x") == 0.0


def test_messages_put_the_context_in_the_system_prompt() -> None:
    system, user = answers.messages("Who?", "[2023-03-03] Nora: hi")
    assert "[2023-03-03] Nora: hi" in system["content"] and user == {
        "role": "user",
        "content": "Who?",
    }
    assert "(none)" in answers.messages("Who?", "  ")[0]["content"]


def _model(request: Request) -> Response:
    """A model that reads its memory: the cat's name when it is there; fails on "recital"."""
    body = request.get_json()
    question, memory = body["messages"][1]["content"], body["messages"][0]["content"]
    if "recital" in question:
        return Response("overloaded", status=503)
    said = "Pixel\nbecause the memory says so" if "Pixel" in memory else "Lisbon"
    reply = {"choices": [{"message": {"content": said}}], "usage": {"prompt_tokens": 9}}
    return Response(json.dumps(reply), content_type="application/json")


@pytest.fixture
def endpoint(httpserver: HTTPServer) -> str:
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(_model)
    return httpserver.url_for("/v1")


def test_the_harness_answers_from_the_context_and_scores(endpoint: str) -> None:
    with OpenAIChat(endpoint, model="stand-in") as llm:
        result = locomo.evaluate(
            locomo.load(FIXTURE), lambda path: MemoryOS.open(path, workers=0), llm=llm
        )
    by = result["by_category"]
    assert by["single-hop"]["f1"] == 1.0 and by["single-hop"]["bleu1"] == 1.0  # "Pixel" only
    assert by["temporal"]["f1"] == 0.0  # the call failed: scored 0, counted
    assert result["overall"]["llm_errors"] == 1 and result["overall"]["llm_model"] == "stand-in"
    # "Pixel" against "Lisbon" and "Likely yes": F1 0; the overall mean is 1 in 4
    assert result["overall"]["f1"] == 0.25
    assert any("stand-in" in line for line in locomo.table(result))


def test_without_a_model_there_are_no_answer_scores() -> None:
    data = locomo.load(FIXTURE)
    steps: list[tuple[int, int]] = []
    result = locomo.evaluate(
        data, lambda path: MemoryOS.open(path, workers=0), progress=lambda *n: steps.append(n)
    )
    assert "f1" not in result["overall"] and "llm_model" not in result["overall"]
    # Progress: every turn ingested and every question asked, summing to the announced work.
    total = locomo.work(data)
    assert steps[0] == (0, total) and {t for _, t in steps} == {total}
    assert sum(n for n, _ in steps) == total
    assert [n for n, _ in steps].count(1) >= result["overall"]["questions"]


def test_eval_command_takes_the_model_from_its_flags(endpoint: str, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    args = ["eval", "locomo", "--data", str(FIXTURE), "--no-tiers", "--out", str(out)]
    flags = ["--llm-provider", "openai", "--llm-base-url", endpoint, "--llm-model", "m"]
    result = CliRunner().invoke(cli, args + flags)
    assert result.exit_code == 0, result.stderr
    overall = json.loads(out.read_text())["overall"]
    assert overall["llm_model"] == "m" and overall["f1"] == 0.25
    assert "f1" in result.stdout and "bleu1" in result.stdout
