"""The inspector's charts: the SVG helpers (``charts``), the heat histogram on the tiers page and
a cube's activity (items created per day by tier, LLM usage) on its page."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date

import pytest

from memstrata.server.ui import charts, parts
from memstrata.server.ui.charts import BOTTOM, HEIGHT, TOP
from tests.ui.conftest import Inspector, Person, tiered

Cube = tuple[Person, str, list[str]]
SignIn = Callable[[str], Person]
RECT = re.compile(r"<rect ([^>]*)>")
PLOT = HEIGHT - TOP - BOTTOM


def rects(html: str, key: str) -> list[dict[str, str]]:
    """The bars of the chart ``key`` on ``html``: each rect's attributes."""
    found = re.search(rf'<svg [^>]*id="{key}".*?</svg>', html, re.S)
    assert found, html
    return [dict(re.findall(r'([a-z-]+)="([^"]*)"', a)) for a in RECT.findall(found.group(0))]


# -- the helpers ---------------------------------------------------------------------------------


def test_bars_are_as_tall_as_their_values() -> None:
    shown = charts.bars("k", "Title <x>", "day", ["a", "b", "c"], {"n": [2, 0, 4]}, "what & why")
    bars = rects(shown, "k")
    assert [(b["data-label"], b["data-value"]) for b in bars] == [("a", "2"), ("c", "4")]
    assert [float(b["height"]) for b in bars] == [PLOT / 2, PLOT]  # a zero draws nothing
    assert all(b["class"] == "bar s0" for b in bars)
    assert '<title id="k-title">Title &lt;x&gt;</title>' in shown  # escaped
    assert '<desc id="k-desc">what &amp; why</desc>' in shown
    assert 'role="img"' in shown and 'aria-labelledby="k-title k-desc"' in shown
    assert "<td>a</td><td>2</td>" in shown and "<td>b</td><td>0</td>" in shown  # the numbers
    assert "style=" not in shown  # the pages' CSP forbids inline styles


def test_stacked_bars_share_one_scale() -> None:
    shown = charts.bars("s", "T", "day", ["d1", "d2"], {"x": [1, 3], "y": [1, 0]}, "d")
    bars = rects(shown, "s")
    assert [(b["data-label"], b["data-series"], b["class"]) for b in bars] == [
        ("d1", "x", "bar s0"), ("d1", "y", "bar s1"), ("d2", "x", "bar s0"),
    ]  # fmt: skip
    heights = [float(b["height"]) for b in bars]
    assert heights == pytest.approx([PLOT / 3, PLOT / 3, PLOT], abs=0.01)
    under, over = bars[0], bars[1]  # d1's second bar stands on its first
    assert float(over["y"]) + float(over["height"]) == pytest.approx(float(under["y"]), abs=0.02)
    assert "<td>d1</td><td>1</td><td>1</td><td>2</td>" in shown  # with a total
    assert 'class="swatch s1"' in shown  # a legend with several series


def test_bars_refuse_what_they_cannot_draw() -> None:
    with pytest.raises(ValueError, match="below zero"):
        charts.bars("k", "T", "x", ["a"], {"n": [-1]}, "d")
    with pytest.raises(ValueError, match="2 values, not 1"):
        charts.bars("k", "T", "x", ["a"], {"n": [1, 2]}, "d")
    with pytest.raises(ValueError, match="1 to 4 series"):
        charts.bars("k", "T", "x", ["a"], {str(n): [1] for n in range(5)}, "d")
    empty = charts.bars("k", "T", "x", ["a"], {"n": [0]}, "d")
    assert rects(empty, "k") == []


def test_histogram_bins() -> None:
    labels, counts = charts.histogram([0.0, 1.0, 2.5, 3.9, 4.0], 4)
    assert labels == ["0.00–1.00", "1.00–2.00", "2.00–3.00", "3.00–4.00"]
    assert counts == [1, 1, 1, 2]  # the last bin holds its upper end
    assert charts.histogram([], 4) == ([], [])
    assert charts.histogram([0.0, 0.0], 4) == (["0.00"], [2])
    assert charts.histogram([2.0], 2) == (["0.00–1.00", "1.00–2.00"], [0, 1])  # from zero


def test_by_day_counts_every_day_between() -> None:
    points = [(date(2026, 1, 1), "working"), (date(2026, 1, 3), "mid"), (date(2026, 1, 3), "mid")]
    days = charts.by_day(points, ["working", "mid"], 10)
    assert days.labels == ["2026-01-01", "2026-01-02", "2026-01-03"]
    assert days.counts == {"working": [1, 0, 0], "mid": [0, 0, 2]}
    assert days.earlier == 0
    cut = charts.by_day(points, ["working", "mid"], 2)
    assert cut.labels == ["2026-01-02", "2026-01-03"] and cut.earlier == 1
    with pytest.raises(ValueError, match="unknown series"):
        charts.by_day(points, ["working"], 10)


# -- on the pages --------------------------------------------------------------------------------


def test_the_tiers_page_has_a_heat_histogram(inspector: Inspector, sign_in: SignIn) -> None:
    owner = sign_in("heat")
    cube_id = tiered(inspector, owner.user_id)
    segments = inspector.memory.list_memories(
        cube_id, user_id=owner.user_id, filters={"tier": "mid", "type": "segment"}
    )
    page = owner.http.get(f"/ui/cubes/{cube_id}/tiers")
    assert page.status_code == 200
    bars = rects(page.text, "heat")
    assert sum(int(b["data-value"]) for b in bars) == len(segments) == 1
    assert [float(b["height"]) for b in bars] == [PLOT]
    assert f"{len(segments)} segments by heat" in page.text  # the text alternative


def test_an_empty_mid_tier_has_no_histogram(cube: Cube) -> None:
    owner, cube_id, _ = cube
    page = owner.http.get(f"/ui/cubes/{cube_id}/tiers")
    assert page.status_code == 200 and 'id="heat"' not in page.text


def test_the_cube_page_shows_items_per_day_by_tier(inspector: Inspector, sign_in: SignIn) -> None:
    owner = sign_in("growth")
    cube_id = tiered(
        inspector, owner.user_id
    )  # turns, a segment of three pages, facts: all made today
    items = inspector.memory.list_memories(cube_id, user_id=owner.user_id, limit=1000)
    per_tier = {t: sum(i.tier == t for i in items) for t in ("working", "mid", "long")}
    assert all(per_tier.values())
    page = owner.http.get(f"/ui/cubes/{cube_id}")
    bars = rects(page.text, "tiers-by-day")
    [today] = {i.created_at.date().isoformat() for i in items}
    assert {b["data-label"] for b in bars} == {today}
    assert {b["data-series"]: int(b["data-value"]) for b in bars} == per_tier
    heights = {b["data-series"]: float(b["height"]) for b in bars}
    total = sum(per_tier.values())
    assert heights == pytest.approx({t: n / total * PLOT for t, n in per_tier.items()}, abs=0.01)
    assert f"{len(items)} searchable items" in page.text
    stats = inspector.memory.stats(user_id=owner.user_id, cube_id=cube_id)[cube_id]
    assert sum(stats["items"].values()) == len(items)  # the cube list's counts
    usage = parts.usage_text(stats["llm_usage"])
    assert f"LLM usage, totals so far: {usage}" in page.text
    assert 'id="llm-calls"' not in page.text  # no call, no chart


def test_the_cube_page_charts_llm_calls_and_tokens_per_day(
    inspector: Inspector, sign_in: SignIn
) -> None:
    owner = sign_in("spender")
    cube_id = tiered(inspector, owner.user_id)
    inspector.memory.store.record_usage(cube_id, 100, 7)  # what a chat counts
    inspector.memory.store.record_usage(cube_id, 20, 3)
    page = owner.http.get(f"/ui/cubes/{cube_id}")
    [(day, _)] = inspector.memory.llm_usage_by_day(cube_id, user_id=owner.user_id)
    [calls] = rects(page.text, "llm-calls")
    assert (calls["data-label"], int(calls["data-value"])) == (day, 2)
    tokens = {b["data-series"]: int(b["data-value"]) for b in rects(page.text, "llm-tokens")}
    assert tokens == {"prompt": 120, "completion": 10}
    assert "LLM usage, totals so far: 2 calls" in page.text


def test_the_activity_is_only_on_the_plain_first_page(cube: Cube) -> None:
    owner, cube_id, _ = cube
    assert 'id="tiers-by-day"' in owner.http.get(f"/ui/cubes/{cube_id}").text
    for params in ({"q": "cat"}, {"tier": "working"}, {"page": "2"}):
        page = owner.http.get(f"/ui/cubes/{cube_id}", params=params)
        assert page.status_code == 200 and 'id="tiers-by-day"' not in page.text, params
