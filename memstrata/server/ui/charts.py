"""Bar charts as inline SVG, drawn on the server: no JavaScript, no CDN, nothing fetched.

``bars`` draws one bar per label, or a stack of bars per label (one per series, bottom up in
the series' order).  Its contract:

* one to ``MAX_SERIES`` series, each a value per label: counts or measures, zero or more
  (``ValueError`` otherwise); a bar's height is its value over the tallest stack's total, times
  the plot's height (all zero: no bar at all); the scale's top is written on the left;
* each bar drawn is ``<rect class="bar sN" data-label=… data-series=… data-value=…>`` (``N``
  the series' place, from 0) holding a ``<title>`` with its label and value; a zero draws none;
* the text alternative: the ``<svg>`` has ``role="img"`` and is labelled by its ``<title>``
  and ``<desc>`` (``desc``: what the chart shows, from the caller), and under it a table of
  every value (label × series, and a total with several series) inside ``<details>``;
* at most ``MAX_TICKS`` labels are written under the bars (every k-th one past that);
* colours come from the stylesheet by class (``sN``): the pages' Content-Security-Policy
  forbids inline styles, so the SVG has none (its geometry is in attributes).

``histogram`` and ``by_day`` shape data for it: numbers in equal-width bins, and counts per day
per series.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from memstrata.server.ui.markup import Child, Markup, join, table, tag

__all__ = ["Days", "bars", "by_day", "histogram"]

#: The drawing's size in SVG units (it scales to the page's width).
WIDTH, HEIGHT = 720, 220
#: Room for the axis labels: left, right, top, bottom.
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 34
#: At most this many labels are written under the bars (every k-th one when there are more).
MAX_TICKS = 10
#: The most series a chart stacks: the stylesheet colours ``s0`` to ``s3``.
MAX_SERIES = 4
#: The widest a bar is drawn, in SVG units (a chart of one or two bars stays a bar chart).
MAX_BAR = 48


def bars(
    key: str,
    title: str,
    axis: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    desc: str,
) -> Markup:
    """A figure: the chart titled ``title`` of ``series`` (each a value per label) over
    ``labels`` (``axis`` names them in the table), with its text alternative.  ``key`` makes the
    ids of the figure's parts unique on a page (one chart per key)."""
    names = list(series)
    if not 1 <= len(names) <= MAX_SERIES:
        raise ValueError(f"a chart has 1 to {MAX_SERIES} series, not {len(names)}")
    for name in names:
        if len(series[name]) != len(labels):
            raise ValueError(f"series {name!r} has {len(series[name])} values, not {len(labels)}")
        if any(not (math.isfinite(v) and v >= 0) for v in series[name]):
            raise ValueError(f"series {name!r} has a value below zero or not a number")
    svg = tag(
        "svg",
        tag("title", title, id=f"{key}-title"),
        tag("desc", desc, id=f"{key}-desc"),
        _axes(labels, series),
        _drawn(labels, series),
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        role="img",
        aria_labelledby=f"{key}-title {key}-desc",
        class_="chart",
        id=key,
    )
    legend = _legend(names) if len(names) > 1 else None
    numbers = tag("details", tag("summary", "the numbers"), _numbers(axis, labels, series))
    return tag("figure", tag("figcaption", title), svg, legend, numbers, class_="chart")


def _scale(labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> float:
    """The largest stack's total (0 when there is nothing to draw)."""
    return max((sum(s[i] for s in series.values()) for i in range(len(labels))), default=0.0)


def _drawn(labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> Markup:
    top = _scale(labels, series)
    if not labels or top <= 0:
        return Markup("")
    band = (WIDTH - LEFT - RIGHT) / len(labels)
    width = min(band * 0.8, MAX_BAR)
    plot = HEIGHT - TOP - BOTTOM
    rects: list[Markup] = []
    for i, label in enumerate(labels):
        base = float(HEIGHT - BOTTOM)
        for n, (name, values) in enumerate(series.items()):
            if values[i] <= 0:
                continue
            height = values[i] / top * plot
            base -= height
            rects.append(tag(
                "rect",
                tag("title", f"{label} · {name}: {_number(values[i])}"),
                x=_at(LEFT + band * (i + 0.5) - width / 2), y=_at(base), width=_at(width),
                height=_at(height), class_=f"bar s{n}", data_label=label, data_series=name,
                data_value=_number(values[i]),
            ))  # fmt: skip
    return join(rects)


def _axes(labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> Markup:
    """The baseline, the scale's top and zero on the left, and (some of) the labels below."""
    base = HEIGHT - BOTTOM
    parts = [
        tag("line", x1=LEFT, y1=base, x2=WIDTH - RIGHT, y2=base, class_="axis"),
        tag("text", _number(_scale(labels, series)), x=LEFT - 4, y=TOP + 8, class_="tick y"),
        tag("text", "0", x=LEFT - 4, y=base, class_="tick y"),
    ]
    if labels:
        band = (WIDTH - LEFT - RIGHT) / len(labels)
        every = math.ceil(len(labels) / MAX_TICKS)
        parts += [
            tag("text", label, x=_at(LEFT + band * (i + 0.5)), y=HEIGHT - 14, class_="tick x")
            for i, label in enumerate(labels)
            if i % every == 0
        ]
    return join(parts)


def _legend(names: Sequence[str]) -> Markup:
    keys = [
        tag("span", tag("span", "", class_=f"swatch s{n}"), name) for n, name in enumerate(names)
    ]
    return tag("p", join(keys, " "), class_="legend")


def _numbers(axis: str, labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> Markup:
    several = len(series) > 1
    rows: list[list[Child]] = []
    for i, label in enumerate(labels):
        values = [s[i] for s in series.values()]
        row: list[Child] = [label, *map(_number, values)]
        rows.append([*row, _number(sum(values))] if several else row)
    headers = [axis, *series, *(["total"] if several else [])]
    return table(headers, rows, empty="No data.")


def _number(value: float) -> str:
    """A value as written on the chart: whole numbers without a point, others to 2 places."""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _at(value: float) -> str:
    return f"{value:.2f}"


def histogram(values: Sequence[float], count: int = 10) -> tuple[list[str], list[int]]:
    """``values`` in ``count`` equal-width bins from min(0, the least) to the largest: the bins'
    labels ("low–high", 2 places) and how many values fall in each (the last bin holds its upper
    end).  No value: no bin; all values equal: one bin."""
    if count < 1:
        raise ValueError("a histogram needs at least one bin")
    if not values:
        return [], []
    low, high = min(0.0, *values), max(values)
    if high == low:
        return [f"{low:.2f}"], [len(values)]
    width = (high - low) / count
    counts = Counter(min(int((v - low) / width), count - 1) for v in values)
    labels = [f"{low + width * i:.2f}–{low + width * (i + 1):.2f}" for i in range(count)]
    return labels, [counts.get(i, 0) for i in range(count)]


@dataclass(frozen=True)
class Days:
    """Counts per day: ``labels`` the days (ISO dates, consecutive, oldest first), ``counts``
    one list per series (a count per day), ``earlier`` how many were left out as older."""

    labels: list[str]
    counts: dict[str, list[int]]
    earlier: int


def by_day(points: Iterable[tuple[date, str]], names: Sequence[str], most: int) -> Days:
    """Count ``points`` (a day and a series' name, one of ``names``) per day, every day from the
    first to the last one with a point, at most the ``most`` latest (the older counted in
    ``earlier``).  A point of a series not in ``names`` is a ``ValueError``."""
    if most < 1:
        raise ValueError("by_day shows at least one day")
    counted = Counter(points)
    unknown = {name for _, name in counted} - set(names)
    if unknown:
        raise ValueError(f"unknown series: {', '.join(sorted(unknown))}")
    if not counted:
        return Days([], {name: [] for name in names}, 0)
    last = max(day for day, _ in counted)
    first = max(min(day for day, _ in counted), last - timedelta(days=most - 1))
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    earlier = sum(n for (day, _), n in counted.items() if day < first)
    counts = {name: [counted.get((day, name), 0) for day in days] for name in names}
    return Days([d.isoformat() for d in days], counts, earlier)
