"""The PrefEval harness on a tiny original fixture in PrefEval's format, with the real e5
embedder, and its multiple-choice path against a stand-in OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata import MemoryOS
from memstrata.cli import cli
from memstrata.config import Settings
from memstrata.embed import make_embedder
from memstrata.eval import answers, fillers, locomo, prefeval
from memstrata.eval.memo import PassageMemo
from memstrata.llm import OpenAIChat
from memstrata.model import MemoryItem
from memstrata.reader.rules import read_page

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DATA = FIXTURES / "prefeval_mini"
LOCOMO = FIXTURES / "locomo_mini.json"
FORMS = {"explicit", "choice-based", "persona-driven"}


def test_load_reads_every_form_and_topic() -> None:
    cases = prefeval.load(DATA)
    assert len(cases) == 12 and {c.form for c in cases} == FORMS
    assert len(prefeval.load(DATA, limit=1)) == 6
    by = {(c.form, c.topic, c.index): c for c in cases}
    explicit = by["explicit", "pets", 0]
    assert explicit.turns == (("user", "I am allergic to cats, so I avoid them."),)
    assert explicit.evidence == (0,) and explicit.options == ()  # no mcq_options for pets
    choice = by["choice-based", "travel", 1]
    assert [role for role, _ in choice.turns] == ["user", "assistant", "user", "assistant"]
    assert choice.turns[choice.evidence[0]][1].startswith("The train, please")
    persona = by["persona-driven", "travel", 0]
    assert len(persona.turns) == 6 and persona.evidence == (0, 2, 4)
    assert persona.options[0].startswith("A quiet guesthouse")  # aligned first, as in the data


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda root: shutil.rmtree(root / "implicit_preference"), "no implicit_preference/"),
        (lambda root: (root / "explicit_preference" / "pets.json").write_text("{"), "as JSON"),
        (lambda root: (root / "explicit_preference" / "pets.json").write_text("[]"), "non-empty"),
        (lambda root: _edit(root, "explicit_preference", lambda i: i.pop("question")),
         "item 0 has no 'question' text"),
        (lambda root: _edit(root, "implicit_preference/persona-driven",
                            lambda i: i["conversation"].update({"x": {}})), "exchange numbers"),
        (lambda root: _edit(root, "implicit_preference/choice-based",
                            lambda i: i["conversation"].pop("user_selection")), "user_selection"),
    ],
)  # fmt: skip
def test_malformed_data_is_a_value_error(tmp_path: Path, damage: Any, message: str) -> None:
    root = tmp_path / "data"
    shutil.copytree(DATA, root)
    damage(root)
    with pytest.raises(ValueError, match=re.escape(message)):
        prefeval.load(root)


def _edit(root: Path, folder: str, change: Any) -> None:
    """Apply ``change`` to the first item of ``folder``'s pets file."""
    path = root / folder / "pets.json"
    items = json.loads(path.read_text())
    change(items[0])
    path.write_text(json.dumps(items))


def test_the_persona_evidence_is_the_turn_closest_to_the_preference() -> None:
    embedder = make_embedder("e5", Settings.load())
    for case in prefeval.load(DATA):
        turn = case.turns[prefeval.evidence_turn(case, embedder)][1]
        if case.form == "persona-driven":  # the middle exchange states it, in other words
            assert turn == case.turns[2][1], case.preference
        else:
            assert turn == case.turns[case.evidence[0]][1]


def test_chit_chat_is_deterministic_distinct_and_states_no_taste() -> None:
    turns = fillers.chit_chat(770)
    assert turns[:11] == fillers.chit_chat(11) and len(set(turns)) == 770
    assert [role for role, _ in turns[:4]] == ["user", "assistant", "user", "assistant"]
    pages = (MemoryItem(id="p", cube_id="c", text=text, role=role) for role, text in turns)
    assert [f for page in pages for f in read_page(page) if f.type == "preference"] == []


def test_filler_pool_from_locomo_and_its_limits() -> None:
    samples = locomo.load(LOCOMO)
    pool = prefeval.filler_pool((2, 5), samples)
    assert len(pool) == 5 and pool[0] == ("user", locomo_first_text(samples))
    assert {role for role, _ in pool} == {"user", "assistant"}
    with pytest.raises(ValueError, match="holds 6 turns, fewer than 7"):
        prefeval.filler_pool((7,), samples)
    with pytest.raises(ValueError, match="none negative"):
        prefeval.filler_pool((3, -1))


def locomo_first_text(samples: list[dict[str, Any]]) -> str:
    _, messages = next(locomo.sessions(samples[0]["conversation"]))
    return str(messages[0]["content"])


def test_options_are_turned_by_the_question() -> None:
    options = ["ok", "b", "c", "d"]
    turns = {q: prefeval.rotated(options, q) for q in ("v", "r", "w", "s")}  # crc32 % 4: 0-3
    assert [aligned for _, aligned in turns.values()] == [0, 3, 2, 1]
    for shown, aligned in turns.values():
        assert shown[aligned] == "ok" and sorted(shown) == sorted(options)
    assert turns["r"] == prefeval.rotated(options, "r")  # the same in every run


def test_the_memo_embeds_each_passage_once() -> None:
    inner = make_embedder("e5", Settings.load())
    memo = PassageMemo(inner)
    first = memo.embed_passages(["a cat", "a dog", "a cat"])
    assert (first[0] == first[2]).all() and len(memo._vectors) == 2
    assert (memo.embed_passages(["a dog"])[0] == inner.embed_passages(["a dog"])[0]).all()
    assert memo.embed_passages([]).shape == (0, inner.dim)
    assert (memo.name, memo.model_id, memo.dim) == (inner.name, inner.model_id, inner.dim)


def _run(tmp_path: Path, *args: str) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "result.json"
    result = CliRunner().invoke(
        cli, ["eval", "prefeval", "--data", str(DATA), "--out", str(out), *args]
    )
    assert result.exit_code == 0, result.stderr
    return result, json.loads(out.read_text())


def test_eval_prefeval_command(tmp_path: Path) -> None:
    result, data = _run(tmp_path, "--fillers", "2,12")
    assert result.stderr == ""  # no progress bar off a terminal
    overall = data["overall"]
    assert overall["questions"] == 24  # 12 items, each asked after 2 and after 12 fillers
    for key in ("recall@500tok", "recall@1000tok", "preference_extracted"):
        assert 0.0 <= overall[key] <= 1.0
    assert overall["recall@1000tok"] >= overall["recall@500tok"]
    # a dozen short turns fit in 1000 tokens: every preference turn is there
    assert overall["recall@1000tok"] == 1.0
    assert set(data["by_form"]) == FORMS and set(data["by_topic"]) == {"pets", "travel"}
    assert set(data["by_fillers"]) == {"2", "12"}
    # the rules read preferences from working turns at once (tiers.long.note), so even after 2
    # fillers, with every turn still in the working tier, some are extracted
    assert data["by_fillers"]["2"]["preference_extracted"] > 0.0
    assert data["by_fillers"]["12"]["preference_extracted"] > 0.0
    assert data["by_form_and_fillers"]["explicit, 12"]["questions"] == 4
    assert data["run"] == {"items": 12, "fillers": [2, 12], "budgets": [500, 1000],
                           "filler_data": "synthetic small talk"}  # fmt: skip
    assert "mcq_aligned@1000tok" not in overall  # no chat model
    assert "persona-driven, 12" in result.stdout and "recall@1000tok" in result.stdout


def test_eval_prefeval_with_locomo_fillers(tmp_path: Path) -> None:
    _, data = _run(tmp_path, "--fillers", "5", "--limit", "1", "--filler-data", str(LOCOMO))
    assert data["overall"]["questions"] == 6 and data["run"]["filler_data"] == str(LOCOMO)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--fillers", "10,x"], 2, "not a list of turn counts"),
        (["--fillers", "7", "--filler-data", str(LOCOMO)], 1, "fewer than 7"),
    ],
)
def test_bad_options_are_one_line(args: list[str], code: int, message: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "prefeval", "--data", str(DATA), *args])
    assert result.exit_code == code and message in result.stderr


def test_a_malformed_data_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "explicit_preference").mkdir()
    (tmp_path / "explicit_preference" / "t.json").write_text('{"not": "a list"}')
    result = CliRunner().invoke(cli, ["eval", "prefeval", "--data", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "PrefEval items" in result.stderr


# -- the multiple-choice variant, with a chat model ------------------------------------------


def _model(request: Request) -> Response:
    """A model that reads its memory: the option sharing most words with it; fails on Paris."""
    system, user = (m["content"] for m in request.get_json()["messages"])
    if "Paris" in user:
        return Response("overloaded", status=503)
    memory = set(re.findall(r"[a-z]+", system.lower()))
    options = re.findall(r"^([A-Z])\. (.*)$", user, re.M)
    best = max(options, key=lambda o: len(memory & set(re.findall(r"[a-z]+", o[1].lower()))))
    reply = {"choices": [{"message": {"content": f"{best[0]}."}}]}
    return Response(json.dumps(reply), content_type="application/json")


def test_the_model_picks_options_from_the_context(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(_model)
    cases = [c for c in prefeval.load(DATA) if c.options]
    assert len(cases) == 6  # the travel items of each form
    with OpenAIChat(httpserver.url_for("/v1"), model="stand-in") as llm:
        result = prefeval.evaluate(
            cases, lambda path: MemoryOS.open(path, workers=0), counts=(4,), llm=llm
        )
    overall = result["overall"]
    assert (overall["llm_model"], overall["llm_errors"], overall["mcq_unanswered"]) == (
        "stand-in", 3, 0
    )  # fmt: skip
    # the Lisbon items pick the quiet guesthouse; the three Paris calls fail and score 0
    assert result["by_topic"]["travel"]["mcq_aligned@1000tok"] == 0.5
    assert any("stand-in" in line for line in prefeval.table(result))


def test_choose_reads_the_letter() -> None:
    class Said:
        model = "fixed"

        def __init__(self, text: str) -> None:
            self.text = text

        def complete(self, messages: Any, **_: Any) -> Any:
            return type("Completion", (), {"text": self.text})()

    assert answers.choose(Said("B) the second"), "q", ["x", "y"], "memory") == 1  # type: ignore[arg-type]
    assert answers.choose(Said("none of them"), "q", ["x", "y"], "") is None  # type: ignore[arg-type]
