"""The error-growth plot: per job, SNR against the reference along the graph, first drift marked.

x is the layer's depth (its node's index in graph order, shared by every job, so targets line up),
y the SNR in dB (higher is closer). A layer whose value is not finite is drawn on the floor with a
cross; the first layer out of tolerance gets a ring and its node's name."""

from __future__ import annotations

from html import escape

from ondevice_farm.analysis.divergence import DivergenceCurve, LayerError
from ondevice_farm.reports.svg import EXTRA_COLOURS, _svg, _text

PLOT_W = 620
PLOT_H = 240
LEFT = 56
TOP = 16
#: SNR drawn at most this high (identical values are capped at 200 dB, which flattens the rest)
CAP_DB = 140.0
FLOOR_DB = -20.0
COLOURS = ("#3d85c6", "#e07a5f", *EXTRA_COLOURS)


def _y(snr: float | None) -> float:
    value = FLOOR_DB if snr is None else max(FLOOR_DB, min(CAP_DB, snr))
    return TOP + PLOT_H * (CAP_DB - value) / (CAP_DB - FLOOR_DB)


def _tip(curve: DivergenceCurve, layer: LayerError) -> str:
    value = "not finite" if layer.snr_db is None else f"{layer.snr_db:.1f} dB"
    return escape(f"{curve.label}: {layer.point.node} ({layer.point.op_type}) {value}")


def layer_error_plot(curves: list[DivergenceCurve]) -> str:
    depth = max((layer.point.depth for c in curves for layer in c.layers), default=1) or 1

    def x(d: int) -> float:
        return LEFT + PLOT_W * d / depth

    body: list[str] = []
    for tick in range(int(FLOOR_DB), int(CAP_DB) + 1, 20):
        y = _y(float(tick))
        body.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y:.1f}" y2="{y:.1f}"/>')
        body.append(_text(LEFT - 6, y + 4, f"{tick}", "end", "tick"))
    body.append(_text(LEFT + PLOT_W, TOP + PLOT_H + 30, "depth (node index in graph order)", "end", "tick"))
    body.append(_text(LEFT, TOP - 4, "SNR vs reference, dB (higher is closer)", "start", "tick"))
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        floor_y = _y(curve.snr_floor_db)
        body.append(
            f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{floor_y:.1f}" y2="{floor_y:.1f}" stroke="{colour}" '
            f'stroke-dasharray="4 3" stroke-opacity=".6"><title>{escape(curve.label)} tolerance '
            f"{curve.snr_floor_db:g} dB</title></line>"
        )
        points = " ".join(f"{x(layer.point.depth):.1f},{_y(layer.snr_db):.1f}" for layer in curve.layers)
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{points}"/>')
        for layer in curve.layers:
            cx, cy = x(layer.point.depth), _y(layer.snr_db)
            if layer.snr_db is None:
                body.append(
                    f'<path class="nonfinite" d="M{cx - 4:.1f},{cy - 4:.1f}l8,8m0,-8l-8,8" stroke="{colour}" '
                    f'stroke-width="2"><title>{_tip(curve, layer)}</title></path>'
                )
            else:
                body.append(
                    f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.6" fill="{colour}">'
                    f"<title>{_tip(curve, layer)}</title></circle>"
                )
        if curve.first is not None:
            cx, cy = x(curve.first.point.depth), _y(curve.first.snr_db)
            body.append(
                f'<circle class="first-divergent" cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" '
                f'stroke="#c0392b" stroke-width="2"><title>{_tip(curve, curve.first)} '
                "(first out of tolerance)</title></circle>"
            )
            body.append(
                _text(cx + 9, cy - 8 - 12 * index, f"drift starts: {curve.first.point.node}", cls="label")
            )
    legend_y = TOP + PLOT_H + 48
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        lx = LEFT + (index % 2) * 320
        ly = legend_y + (index // 2) * 16
        body.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>')
        label = curve.label if curve.source in curve.label else f"{curve.label} ({curve.source})"
        body.append(_text(lx + 14, ly, label))
    note_y = legend_y + 16 * ((len(curves) + 1) // 2)
    body.append(
        _text(LEFT, note_y, "x on the floor: inf/NaN where the reference is finite; dashed: tolerance")
    )
    height = note_y + 10
    return _svg(LEFT + PLOT_W + 160, height, body, "error growth per layer")
