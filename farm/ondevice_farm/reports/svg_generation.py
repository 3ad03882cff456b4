"""The generation plots: each token's decode latency in order (one line per timed generation),
and the depth curve (decode tokens/s and TTFT against the tokens already in the cache)."""

from __future__ import annotations

from html import escape

from ondevice_farm.reports.svg_series import SeriesStyle, series_plot


def line_plot(rows: list[tuple[str, list[tuple[float, float]]]], x_label: str, unit: str, label: str) -> str:
    """One polyline per row over a shared x axis from 0; every point carries a tooltip."""
    style = SeriesStyle(
        x_label=x_label, point_title=lambda name, x, y: f"{escape(name)}: {x:g}, {y:.4g} {escape(unit)}"
    )
    return series_plot(rows, unit, label, style)
