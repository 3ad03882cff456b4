"""The generation plots: each token's decode latency in order (one line per timed generation),
and the depth curve (decode tokens/s and TTFT against the tokens already in the cache)."""

from __future__ import annotations

from html import escape

from ondevice_farm.reports.svg import _nice_ticks, _svg, _text
from ondevice_farm.reports.svg_layers import COLOURS

PLOT_W = 620
PLOT_H = 180
LEFT = 64
TOP = 18


def line_plot(rows: list[tuple[str, list[tuple[float, float]]]], x_label: str, unit: str, label: str) -> str:
    """One polyline per row over a shared x axis from 0; every point carries a tooltip."""
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
    body.append(_text(LEFT + PLOT_W, TOP + PLOT_H + 28, x_label, "end", "tick"))
    body.append(_text(LEFT, TOP - 5, unit, cls="tick"))
    for index, (name, series) in enumerate(rows):
        colour = COLOURS[index % len(COLOURS)]
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in series)
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.4" points="{line}"/>')
        for x, y in series:
            body.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="{colour}">'
                f"<title>{escape(name)}: {x:g}, {y:.4g} {escape(unit)}</title></circle>"
            )
        body.append(f'<rect x="{LEFT + 200 * (index % 3)}" y="{TOP + PLOT_H + 38 + 14 * (index // 3)}" '
                    f'width="10" height="10" fill="{colour}"/>')  # fmt: skip
        body.append(_text(LEFT + 200 * (index % 3) + 14, TOP + PLOT_H + 47 + 14 * (index // 3), name))
    legend_rows = (len(rows) + 2) // 3
    return _svg(LEFT + PLOT_W + 40, TOP + PLOT_H + 44 + 14 * legend_rows, body, label)
