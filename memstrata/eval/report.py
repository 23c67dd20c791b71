"""The HTML report of LoCoMo results (``memstrata eval report``, ``memstrata eval locomo --report``).

``html(runs)`` turns results as ``locomo.evaluate`` returns them (and ``--out`` writes them) into
one self-contained page: inline SVG charts (``eval.svg``) and tables, no script, nothing fetched,
so it opens offline and can be mailed as one file.  Every figure is read from the results: the
budgets, categories and runs drawn are those the results hold.  Several runs are drawn side by
side, one colour per run in every chart.

The page has a summary table (questions, tokens per query, ingest speed, latency, answer scores
when a run has them); recall within each token budget, one chart per category; and the query
latency: a histogram of every question's when a result holds them (``query_ms``, written since
the report exists), and p50 / p95 bars for every run (older results hold only those two).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from memstrata.eval import svg

#: The keys of recall within a token budget: ``recall@1000tok``.
BUDGET = re.compile(r"recall@(\d+)tok")
#: The page ``write`` writes in its folder.
PAGE = "index.html"
#: Bins of the latency histogram, of a round width; the last also holds everything above the
#: slowest run's p99.
LATENCY_BINS = 20
#: The keys of the latency percentiles drawn as bars.
PERCENTILES = ("query_ms_p50", "query_ms_p95")
#: The summary's columns: result key → heading (a column only when some run has the key).
SUMMARY = {
    "questions": "questions",
    "tokens_per_query": "tokens / query",
    "ingest_turns_per_s": "ingest turns / s",
    "query_ms_p50": "query p50 ms",
    "query_ms_p95": "query p95 ms",
    "f1": "answer F1",
    "bleu1": "answer BLEU-1",
    "llm_model": "answered by",
}


@dataclass(frozen=True)
class Run:
    """One LoCoMo result (checked by ``check``) and the name the report gives it."""

    name: str
    result: Mapping[str, Any]


def load(path: str | Path) -> Run:
    """The LoCoMo result in the JSON file ``path``, named by the path; ``ValueError`` saying
    what is wrong with any other file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path} as JSON: {exc}") from exc
    return Run(str(path), check(data, str(path)))


def check(result: object, name: str) -> Mapping[str, Any]:
    """``result`` if it has the shape of ``locomo.evaluate``'s (``overall`` with ``questions``
    and at least one ``recall@Ntok``, ``by_category`` of such groups, ``query_ms`` a list of
    numbers if there), else ``ValueError`` naming ``name``."""
    bad = f"{name} is not a LoCoMo result of memstrata eval locomo"
    if not isinstance(result, Mapping):
        raise ValueError(f"{bad} (not a JSON object)")
    overall, groups = result.get("overall"), result.get("by_category")
    if not isinstance(overall, Mapping) or not isinstance(groups, Mapping):
        raise ValueError(f"{bad} (no overall and by_category)")
    for group in (overall, *groups.values()):
        if not isinstance(group, Mapping) or not _budgets_of(group):
            raise ValueError(f"{bad} (a group without recall@Ntok figures)")
        figures = [v for k, v in group.items() if k == "questions" or BUDGET.fullmatch(k)]
        if not all(_is_number(v) for v in figures):
            raise ValueError(f"{bad} (a figure that is not a number)")
    latencies = result.get("query_ms", [])
    if not isinstance(latencies, list) or not all(_is_number(v) for v in latencies):
        raise ValueError(f"{bad} (query_ms is not a list of numbers)")
    return result


def write(runs: Sequence[Run], folder: str | Path) -> Path:
    """Write ``html(runs)`` as ``PAGE`` in ``folder`` (made if missing, the page replaced if
    there); returns the page's path.  ``OSError`` as the file system raises it."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    page = target / PAGE
    page.write_text(html(runs), encoding="utf-8")
    return page


def html(runs: Sequence[Run]) -> str:
    """The report of ``runs`` (at least one, each ``check``-ed) as one HTML page."""
    if not runs:
        raise ValueError("a report needs at least one result")
    legend = " ".join(
        f'<span class="run"><span class="swatch" style="background:{svg.color(i)}"></span>'
        f"{escape(run.name)}</span>"
        for i, run in enumerate(runs)
    )
    body = [f'<h1>LoCoMo report</h1>\n<p class="legend">{legend}</p>', _summary(runs),
            _recall(runs), _latency(runs)]  # fmt: skip
    return _PAGE.format(body="\n".join(body))


def _summary(runs: Sequence[Run]) -> str:
    """The overall figures of each run, one row per run."""
    keys = [k for k in SUMMARY if any(k in run.result["overall"] for run in runs)]
    rows = [[run.name, *(_cell(run.result["overall"].get(k)) for k in keys)] for run in runs]
    return "<h2>Summary</h2>\n" + _table(["run", *(SUMMARY[k] for k in keys)], rows, 1)


def _recall(runs: Sequence[Run]) -> str:
    """Recall within each token budget: a chart per group (overall, then each category), and
    the same figures as a table."""
    groups = _groups(runs)
    budgets = sorted({b for run in runs for g in groups for b in _budgets_of(_group(run, g))})
    categories = [str(b) for b in budgets]
    charts, rows = [], []
    for group in groups:
        series = []
        for i, run in enumerate(runs):
            figures = _group(run, group)
            values = [figures.get(f"recall@{b}tok") for b in budgets]
            series.append(svg.Series(run.name, svg.color(i), values))
            if figures:
                rows.append([group, run.name, *(_cell(v) for v in values)])
        charts.append(svg.line_chart(f"{group}: evidence recall", categories, series,
                                     y_max=1.0, axes=("token budget", "recall")))  # fmt: skip
    head = ["group", "run", *(f"≤ {b} tok" for b in budgets)]
    return (
        "<h2>Recall within a token budget</h2>\n<p>The share of questions whose evidence turns "
        "are all, verbatim, in the context packed within that many tokens "
        "(<code>recall@Ntok</code>).</p>\n"
        f'<div class="charts">{"".join(charts)}</div>\n{_table(head, rows, 2)}'
    )


def _latency(runs: Sequence[Run]) -> str:
    """A histogram of every question's latency (runs that hold them), and p50 / p95 bars."""
    held = [(i, run) for i, run in enumerate(runs) if run.result.get("query_ms")]
    charts = [_histogram(held)] if held else []
    bars = [
        svg.Series(run.name, svg.color(i), [run.result["overall"].get(k) for k in PERCENTILES])
        for i, run in enumerate(runs)
    ]
    charts.append(svg.bar_chart("p50 and p95", ["p50", "p95"], bars, axes=("", "ms")))
    text = ("<h2>Query latency</h2>\n<p>Milliseconds per call (a question's search and its "
            f'packed contexts, averaged).</p>\n<div class="charts">{"".join(charts)}</div>')  # fmt: skip
    missing = [escape(run.name) for run in runs if not run.result.get("query_ms")]
    if missing:
        text += (f"\n<p>{', '.join(missing)}: p50 and p95 only, in the bars (the result holds "
                 "no latency of each question to draw a histogram of).</p>")  # fmt: skip
    return text


def _histogram(held: Sequence[tuple[int, Run]]) -> str:
    """The share of each run's questions per latency bin, bins shared by the runs."""
    slowest = max(_p99(run.result["query_ms"]) for _, run in held)
    width = svg.nice(slowest / LATENCY_BINS) if slowest > 0 else 1.0
    names = [f"{svg.number(k * width)}–{svg.number((k + 1) * width)}" for k in range(LATENCY_BINS)]
    names[-1] = f"≥ {svg.number((LATENCY_BINS - 1) * width)}"
    series = []
    for i, run in held:
        values = run.result["query_ms"]
        counts = [0] * LATENCY_BINS
        for v in values:
            counts[min(int(v / width), LATENCY_BINS - 1)] += 1
        shares = [c / len(values) for c in counts]
        notes = [f"{s:.1%} ({c} questions)" for s, c in zip(shares, counts, strict=True)]
        series.append(svg.Series(run.name, svg.color(i), shares, notes))
    return svg.bar_chart("latency per question", names, series,
                         axes=("ms", "share of questions"))  # fmt: skip


def _groups(runs: Sequence[Run]) -> list[str]:
    """``overall``, then every category any run has, in the order first seen."""
    seen = {"overall": None}
    for run in runs:
        seen |= dict.fromkeys(run.result["by_category"])
    return list(seen)


def _group(run: Run, group: str) -> Mapping[str, Any]:
    """The figures of ``group`` in ``run`` (empty when it has no such category)."""
    figures: Mapping[str, Any] = (
        run.result["overall"] if group == "overall" else run.result["by_category"].get(group, {})
    )
    return figures


def _budgets_of(group: Mapping[str, Any]) -> list[int]:
    return [int(m.group(1)) for key in group if (m := BUDGET.fullmatch(key))]


def _p99(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else max(values)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: object) -> str:
    """A table cell: a number as the charts print it, "–" for none."""
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return svg.number(value)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], labels: int) -> str:
    """A table whose first ``labels`` columns are names (left-aligned), the rest figures."""

    def row(cells: Sequence[str], tag: str) -> str:
        return (
            "<tr>"
            + "".join(
                f"<{tag}{' class=label' if i < labels else ''}>{escape(c)}</{tag}>"
                for i, c in enumerate(cells)
            )
            + "</tr>"
        )

    lines = [f"<table><thead>{row(head, 'th')}</thead><tbody>", *(row(r, "td") for r in rows)]
    return "\n".join([*lines, "</tbody></table>"])


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>LoCoMo report</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1320px; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: right; }}
.label {{ text-align: left; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 8px; }}
.chart text {{ font-size: 11px; fill: #333; text-anchor: middle; }}
.chart .title {{ font-size: 13px; font-weight: 600; }}
.chart .y {{ text-anchor: end; }}
.chart .grid {{ stroke: #e4e4e4; }}
.legend .run {{ margin-right: 1.5em; white-space: nowrap; }}
.swatch {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
