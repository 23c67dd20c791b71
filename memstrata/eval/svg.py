"""Small charts as inline SVG for the HTML report: no script, no plotting library, nothing fetched.

A chart is one ``<svg>`` element, as text.  Categories (token budgets, latency bins, runs) sit at
even steps along x and y starts at 0.  Every mark carries its value in a ``<title>``, which a
browser shows on hover, so a figure can be read exactly (and tested); names are escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

#: Series colours, in order (Tableau 10, which most colour-blind readers tell apart).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")  # fmt: skip
WIDTH, HEIGHT = 420, 250
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 28, 46
#: At most this many labels along x (a histogram's bins would overlap).
X_LABELS = 6
#: Steps a nice round number is made of, times a power of ten.
NICE = (1.0, 2.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class Series:
    """One run's values, one per category (None: nothing there).  ``notes``, when given (one per
    value), is what each value's tooltip says instead of the bare number."""

    name: str
    color: str
    values: Sequence[float | None]
    notes: Sequence[str] | None = None

    def marks(self, categories: Sequence[str]) -> list[tuple[int, float, str]]:
        """(category index, value, tooltip) of every value there."""
        notes = self.notes or ["" if v is None else number(v) for v in self.values]
        return [
            (i, v, f"{self.name}, {categories[i]}: {notes[i]}")
            for i, v in enumerate(self.values)
            if v is not None
        ]


def color(index: int) -> str:
    """The colour of the ``index``-th series (the palette repeats past its end)."""
    return PALETTE[index % len(PALETTE)]


def number(value: float) -> str:
    """``value`` as the report prints it: at most 3 decimals, no trailing zeros."""
    return f"{round(value, 3):g}"


def nice(value: float) -> float:
    """The least of 1, 2, 2.5 or 5 times a power of ten that is at least ``value`` (> 0)."""
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in NICE if step * power >= value)


def line_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    y_max: float,
    axes: tuple[str, str],
) -> str:
    """One line per series through its values (a dot with a tooltip at each); ``axes`` names
    x and y."""
    frame = _Frame(len(categories), y_max)
    marks = []
    for s in series:
        points = [(frame.x(i), frame.y(v), note) for i, v, note in s.marks(categories)]
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
        marks.append(f'<polyline points="{line}" fill="none" stroke="{s.color}" stroke-width="2"/>')
        marks += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{s.color}">'
            f"<title>{escape(note)}</title></circle>"
            for x, y, note in points
        ]
    return frame.svg(title, categories, axes, marks)


def bar_chart(
    title: str, categories: Sequence[str], series: Sequence[Series], *, axes: tuple[str, str]
) -> str:
    """Bars side by side in each category, one per series, each with a tooltip; y goes up to a
    round number above the highest value."""
    top = max((v for s in series for v in s.values if v is not None), default=0.0)
    frame = _Frame(len(categories), 4 * nice(top / 4) if top > 0 else 1.0)
    width = frame.step * 0.8 / max(1, len(series))
    marks = []
    for j, s in enumerate(series):
        for i, v, note in s.marks(categories):
            x, y = frame.x(i) - frame.step * 0.4 + j * width, frame.y(v)
            marks.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{frame.y(0) - y:.1f}" '
                f'fill="{s.color}"><title>{escape(note)}</title></rect>'
            )
    return frame.svg(title, categories, axes, marks)


@dataclass(frozen=True)
class _Frame:
    """The plotting area: ``count`` categories along x, 0 to ``y_max`` up y."""

    count: int
    y_max: float

    @property
    def step(self) -> float:
        return (WIDTH - LEFT - RIGHT) / max(1, self.count)

    def x(self, index: int) -> float:
        """The middle of category ``index``."""
        return LEFT + self.step * (index + 0.5)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * min(value / self.y_max, 1.0)

    def svg(
        self, title: str, categories: Sequence[str], axes: tuple[str, str], marks: list[str]
    ) -> str:
        """The ``<svg>`` element: title, grid and ticks, the axes' names, then ``marks``."""
        x_label, y_label = axes
        every = math.ceil(len(categories) / X_LABELS) or 1
        ticks = [self.y_max * k / 4 for k in range(5)]
        parts = [
            f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
            f'height="{HEIGHT}" role="img"><title>{escape(title)}</title>',
            f'<text x="{WIDTH / 2}" y="16" class="title">{escape(title)}</text>',
            *(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{self.y(t):.1f}" '
                f'y2="{self.y(t):.1f}" class="grid"/><text x="{LEFT - 4}" '
                f'y="{self.y(t) + 4:.1f}" class="tick y">{number(t)}</text>'
                for t in ticks
            ),
            *(
                f'<text x="{self.x(i):.1f}" y="{HEIGHT - BOTTOM + 14}" class="tick">'
                f"{escape(name)}</text>"
                for i, name in enumerate(categories)
                if i % every == 0
            ),
            f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" class="axis">{escape(x_label)}</text>',
            f'<text x="12" y="{HEIGHT / 2}" class="axis" '
            f'transform="rotate(-90 12 {HEIGHT / 2})">{escape(y_label)}</text>',
            *marks,
            "</svg>",
        ]
        return "\n".join(parts)
