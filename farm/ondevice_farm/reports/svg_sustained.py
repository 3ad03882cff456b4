"""The sustained-run plots: per job, window p50 latency over time, and temperature where the
platform reports it; every job on the same time axis, so minute 1 and minute 30 line up."""

from __future__ import annotations

from html import escape
from typing import Any

from ondevice_farm.reports.svg import _nice_ticks, _svg, _text
from ondevice_farm.reports.svg_layers import COLOURS

PLOT_W = 620
PLOT_H = 180
LEFT = 64
TOP = 18


def _series_plot(
    rows: list[tuple[str, list[tuple[float, float]]]], unit: str, label: str, marks: dict[str, float]
) -> str:
    points = [p for _, series in rows for p in series]
    if not points:
        return ""
    t_max = max(t for t, _ in points) or 1.0
    v_max = max(v for _, v in points) * 1.1 or 1.0

    def x(t: float) -> float:
        return LEFT + PLOT_W * t / t_max

    def y(v: float) -> float:
        return TOP + PLOT_H * (1 - v / v_max)

    body: list[str] = []
    for tick in _nice_ticks(v_max, 4):
        body.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
        )
        body.append(_text(LEFT - 6, y(tick) + 4, f"{tick:g}", "end", "tick"))
    for tick in _nice_ticks(t_max, 6):
        if tick <= t_max:
            body.append(_text(x(tick), TOP + PLOT_H + 14, f"{tick:g}", "middle", "tick"))
    body.append(_text(LEFT + PLOT_W, TOP + PLOT_H + 28, "seconds into the sustained run", "end", "tick"))
    body.append(_text(LEFT, TOP - 5, unit, cls="tick"))
    for index, (name, series) in enumerate(rows):
        colour = COLOURS[index % len(COLOURS)]
        line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in series)
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{line}"/>')
        for t, v in series:
            body.append(
                f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.4" fill="{colour}">'
                f"<title>{escape(name)} at {t:.0f} s: {v:.3g} {escape(unit)}</title></circle>"
            )
        if name in marks:
            mx = x(marks[name])
            body.append(
                f'<line class="throttle" x1="{mx:.1f}" x2="{mx:.1f}" y1="{TOP}" y2="{TOP + PLOT_H}" '
                f'stroke="{colour}" stroke-dasharray="3 3"><title>{escape(name)} first throttles at '
                f"{marks[name]:.0f} s</title></line>"
            )
        body.append(
            f'<rect x="{LEFT + 250 * index}" y="{TOP + PLOT_H + 38}" width="10" height="10" fill="{colour}"/>'
        )
        body.append(_text(LEFT + 250 * index + 14, TOP + PLOT_H + 47, name))
    return _svg(LEFT + PLOT_W + 40, TOP + PLOT_H + 58, body, label)


def sustained_plots(jobs: list[tuple[str, dict[str, Any]]]) -> str:
    """`jobs`: (label, the job's `sustained` section) for each job that has one."""
    latency = [
        (label, [(w["end_s"], w["p50_ms"]) for w in s["windows"] if w["p50_ms"] is not None])
        for label, s in jobs
    ]
    temperature = [
        (
            label,
            [
                (w["end_s"], w["max_temperature_c"])
                for w in s["windows"]
                if w["max_temperature_c"] is not None
            ],
        )
        for label, s in jobs
    ]
    marks = {
        label: float(s["summary"]["time_to_first_throttle_s"])
        for label, s in jobs
        if s["summary"].get("time_to_first_throttle_s") is not None
    }
    plots = _series_plot(latency, "p50 ms per window", "sustained latency over time", marks)
    if any(series for _, series in temperature):
        plots += _series_plot(temperature, "max temperature °C", "temperature over time", marks)
    return plots
