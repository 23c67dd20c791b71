"""The HTML report of LoCoMo results (``memstrata.eval.report``, ``memstrata eval report``), on
small synthetic results in ``locomo.evaluate``'s shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memstrata.cli import cli
from memstrata.eval import report, svg

CATEGORIES = ("multi-hop", "temporal")


def result(recall: float, *, p50: float = 12.5, latencies: list[float] | None = None) -> Any:
    """A result whose recall@Ntok is ``recall`` at 500, ``recall`` + 0.1 at 1000 and + 0.2 at
    2000 tokens, overall and in each category (+ 0.01 per category)."""

    def group(shift: float, questions: int) -> dict[str, Any]:
        at = {
            b: round(recall + shift + step, 3) for b, step in ((500, 0), (1000, 0.1), (2000, 0.2))
        }
        return {f"recall@{b}tok": v for b, v in at.items()} | {
            "recall@10": 0.9,
            "questions": questions,
        }

    overall = group(0, 10) | {"tokens_per_query": 640.2, "ingest_turns_per_s": 55.0,
                              "query_ms_p50": p50, "query_ms_p95": 2 * p50}  # fmt: skip
    by = {name: group(0.01 * (i + 1), 5) for i, name in enumerate(CATEGORIES)}
    found: dict[str, Any] = {"overall": overall, "by_category": by}
    if latencies is not None:
        found["query_ms"] = latencies
    return found


def tooltips(page: str) -> set[str]:
    return set(re.findall(r"<title>([^<]*)</title>", page))


def test_the_charts_hold_the_results_figures() -> None:
    page = report.html([report.Run("tiers", result(0.42, latencies=[3.0, 4.0, 41.0]))])
    said = tooltips(page)
    # recall per budget, overall and per category, read from the result
    assert {"tiers, 500: 0.42", "tiers, 1000: 0.52", "tiers, 2000: 0.62"} <= said
    assert {"tiers, 500: 0.43", "tiers, 2000: 0.64", "tiers, 1000: 0.54"} <= said
    assert {
        "overall: evidence recall",
        "multi-hop: evidence recall",
        "temporal: evidence recall",
    } <= said
    # the latency histogram counts every question; p50 and p95 are drawn as given
    shares = [t for t in said if t.startswith("tiers, ") and "questions)" in t]
    assert sum(int(re.search(r"\((\d+) questions\)", t)[1]) for t in shares) == 3  # type: ignore[index]
    assert {"tiers, p50: 12.5", "tiers, p95: 25"} <= said
    assert "p50 and p95 only" not in page
    # self-contained: no script, nothing fetched
    assert "<script" not in page and "http" not in page and "<link" not in page


def test_several_runs_side_by_side() -> None:
    runs = [report.Run("raw turns", result(0.2, p50=8.0)), report.Run("tiers", result(0.5))]
    page = report.html(runs)
    said = tooltips(page)
    for name, low in (("raw turns", "0.2"), ("tiers", "0.5")):
        assert f"{name}, 500: {low}" in said  # in the same chart, each in its colour
    assert page.count(f'stroke="{svg.color(0)}"') == page.count(f'stroke="{svg.color(1)}"') == 3
    rows = re.findall(r"<tr><td class=label>overall</td><td class=label>([^<]*)</td>", page)
    assert rows == ["raw turns", "tiers"]
    # neither holds per-question latencies: no histogram, and the page says so
    assert "<title>latency per question</title>" not in page
    assert "raw turns, tiers: p50 and p95 only" in page


def test_budgets_and_categories_come_from_the_results() -> None:
    odd = result(0.3)
    odd["overall"]["recall@4000tok"] = 0.77
    odd["by_category"]["adversarial"] = {"recall@500tok": 0.11, "questions": 2}
    said = tooltips(report.html([report.Run("odd", odd)]))
    assert {"odd, 4000: 0.77", "odd, 500: 0.11", "adversarial: evidence recall"} <= said


def test_names_are_escaped() -> None:
    page = report.html([report.Run("<b>&", result(0.1))])
    assert "<b>&" not in page and "&lt;b&gt;&amp;" in page


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"overall": {"questions": 3}},
        {"overall": {"recall@500tok": 0.5}, "by_category": {"x": {"recall@1": 1.0}}},
        {"overall": {"recall@500tok": "high"}, "by_category": {}},
        {"overall": {"recall@500tok": 0.5}, "by_category": {}, "query_ms": "fast"},
    ],
)
def test_what_is_not_a_locomo_result_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="not a LoCoMo result"):
        report.check(bad, "x.json")


# -- the command -----------------------------------------------------------------------------


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_eval_report_writes_one_page_for_several_results(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(result(0.25, latencies=[5.0, 6.0])))
    second.write_text(json.dumps(result(0.35)))
    out = tmp_path / "report"
    done = invoke("eval", "report", str(first), str(second), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert done.stdout == f"wrote {out / 'index.html'}\n" and done.stderr == ""
    said = tooltips((out / "index.html").read_text())
    assert {f"{first}, 500: 0.25", f"{second}, 500: 0.35"} <= said
    again = invoke("--json", "eval", "report", str(first), "--out", str(out))
    assert json.loads(again.stdout) == {"report": str(out / "index.html"), "runs": [str(first)]}


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "cannot read"),
        ('{"overall": {}, "rows": []}', "is not a LoCoMo result"),
        ("[1, 2]", "is not a LoCoMo result"),
    ],
)
def test_a_file_that_is_not_a_result_is_one_error_line(
    tmp_path: Path, content: str, said: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    failed = invoke("eval", "report", str(bad), "--out", str(tmp_path / "report"))
    assert failed.exit_code == 1 and failed.stdout == ""
    assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("error: ")
    assert said in failed.stderr and "Traceback" not in failed.stderr
    assert not (tmp_path / "report").exists()


def test_a_report_folder_that_is_a_file_is_one_error_line(tmp_path: Path) -> None:
    good, taken = tmp_path / "a.json", tmp_path / "taken"
    good.write_text(json.dumps(result(0.5)))
    taken.write_text("")
    failed = invoke("eval", "report", str(good), "--out", str(taken))
    assert failed.exit_code in (1, 2) and failed.stderr.count("\n") == 1
    assert failed.stderr.startswith("error: ") and "Traceback" not in failed.stderr


def test_usage_errors(tmp_path: Path) -> None:
    missing = invoke("eval", "report", "--out", str(tmp_path / "r"))
    assert missing.exit_code == 2 and "RESULTS" in missing.stderr
    data = Path(__file__).resolve().parent.parent / "fixtures" / "locomo_mini.json"
    facts = invoke("eval", "locomo", "--data", str(data), "--facts", "--report", str(tmp_path))
    assert facts.exit_code == 2 and "--facts" in facts.stderr and facts.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("value", "rounded"), [(0.055, 0.1), (0.2, 0.2), (2.2, 2.5), (7.0, 10.0), (1.0, 1.0), (31, 50)]
)
def test_axes_end_on_round_numbers(value: float, rounded: float) -> None:
    assert svg.nice(value) == pytest.approx(rounded)
