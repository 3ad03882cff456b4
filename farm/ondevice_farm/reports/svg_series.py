"""One line per series over a shared x axis from 0, every point with a tooltip: the plot the
sustained run (latency and temperature over time) and generation jobs (per-token latency, the
depth curve) draw."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ondevice_farm.reports.svg import _nice_ticks, _svg, _text
from ondevice_farm.reports.svg_layers import COLOURS

PLOT_W = 620
PLOT_H = 180
LEFT = 64
TOP = 18


@dataclass(frozen=True)
class SeriesStyle:
    x_label: str
    #: a point's tooltip from (series name, x, y)
    point_title: Callable[[str, float, float], str]
    #: as written into the SVG
    stroke_width: str = "1.4"
    radius: str = "2"
    #: legend entries per legend row, and the distance between two in a row
    legend_columns: int = 3
    legend_step: int = 200
    #: series name -> x of a dashed vertical mark (a sustained run's first throttle), with its title
    marks: dict[str, float] = field(default_factory=dict)
    mark_title: Callable[[str, float], str] = lambda name, at: ""


def series_plot(
    rows: list[tuple[str, list[tuple[float, float]]]], unit: str, label: str, style: SeriesStyle
) -> str:
    points = [p for _, series in rows for p in series]
    if not points:
        return ""
    x_max = max(x for x, _ in points) or 1.0
    y_max = max(y for _, y in points) * 1.1 or 1.0

    def px(x: float) -> float:
        return LEFT + PLOT_W * x / x_max

    def py(y: float) -> float:
        return TOP + PLOT_H * (1 - y / y_max)

    body: list[str] = []
    for tick in _nice_ticks(y_max, 4):
        body.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{py(tick):.1f}" y2="{py(tick):.1f}"/>'
        )
        body.append(_text(LEFT - 6, py(tick) + 4, f"{tick:g}", "end", "tick"))
    for tick in _nice_ticks(x_max, 6):
        if tick <= x_max:
            body.append(_text(px(tick), TOP + PLOT_H + 14, f"{tick:g}", "middle", "tick"))
    body.append(_text(LEFT + PLOT_W, TOP + PLOT_H + 28, style.x_label, "end", "tick"))
    body.append(_text(LEFT, TOP - 5, unit, cls="tick"))
    for index, (name, series) in enumerate(rows):
        colour = COLOURS[index % len(COLOURS)]
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in series)
        body.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="{style.stroke_width}" points="{line}"/>'
        )
        for x, y in series:
            body.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{style.radius}" fill="{colour}">'
                f"<title>{style.point_title(name, x, y)}</title></circle>"
            )
        if name in style.marks:
            mx = px(style.marks[name])
            body.append(
                f'<line class="throttle" x1="{mx:.1f}" x2="{mx:.1f}" y1="{TOP}" y2="{TOP + PLOT_H}" '
                f'stroke="{colour}" stroke-dasharray="3 3"><title>{style.mark_title(name, style.marks[name])}'
                "</title></line>"
            )
        column, row = index % style.legend_columns, index // style.legend_columns
        body.append(f'<rect x="{LEFT + style.legend_step * column}" y="{TOP + PLOT_H + 38 + 14 * row}" '
                    f'width="10" height="10" fill="{colour}"/>')  # fmt: skip
        body.append(_text(LEFT + style.legend_step * column + 14, TOP + PLOT_H + 47 + 14 * row, name))
    legend_rows = (len(rows) + style.legend_columns - 1) // style.legend_columns
    return _svg(LEFT + PLOT_W + 40, TOP + PLOT_H + 44 + 14 * legend_rows, body, label)
