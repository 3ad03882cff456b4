"""The sustained-run plots: per job, window p50 latency over time, and temperature where the
platform reports it; every job on the same time axis, so minute 1 and minute 30 line up."""

from __future__ import annotations

from html import escape
from typing import Any

from ondevice_farm.reports.svg_series import SeriesStyle, series_plot


def _series_plot(
    rows: list[tuple[str, list[tuple[float, float]]]], unit: str, label: str, marks: dict[str, float]
) -> str:
    style = SeriesStyle(
        x_label="seconds into the sustained run",
        point_title=lambda name, t, v: f"{escape(name)} at {t:.0f} s: {v:.3g} {escape(unit)}",
        stroke_width="1.8",
        radius="2.4",
        legend_columns=len(rows) or 1,  # one legend row
        legend_step=250,
        marks=marks,
        mark_title=lambda name, at: f"{escape(name)} first throttles at {at:.0f} s",
    )
    return series_plot(rows, unit, label, style)


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
