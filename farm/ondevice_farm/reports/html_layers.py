"""The report's "Where drift starts" section: the error-growth plot and a table per job."""

from __future__ import annotations

from ondevice_farm.analysis.divergence import DivergenceCurve
from ondevice_farm.reports.html_sections import _num, _table, e
from ondevice_farm.reports.svg_layers import layer_error_plot

#: layers in each job's table: around the first divergent one, else the lowest-SNR ones
TABLE_ROWS = 12


def _method(curve: DivergenceCurve) -> str:
    how = {
        "all": "every layer in one run",
        "sampled": "layers sampled evenly in one run",
        "bisection": "layers sampled, then bisection",
    }.get(curve.method, curve.method)
    return f"{how}; {curve.runs} run(s) of the target, plus the host reference's"


def _rows(curve: DivergenceCurve) -> list[list[str]]:
    rows = []
    for layer in curve.shown(TABLE_ROWS):
        first = curve.first is not None and layer.point == curve.first.point
        rows.append(
            [
                e(layer.point.depth),
                ("<strong>" if first else "") + e(layer.point.node) + (" (first)</strong>" if first else ""),
                e(layer.point.op_type),
                "-" if layer.max_abs is None else f"{layer.max_abs:.2e}",
                "-" if layer.rel_err is None else f"{layer.rel_err:.2e}",
                f"{layer.nonfinite} inf/NaN" if layer.snr_db is None else _num(layer.snr_db, 1),
            ]
        )
    return rows


def layers(curves: list[DivergenceCurve] | None, missing: dict[str, str]) -> str:
    if curves is None:
        return ""
    parts = []
    if curves:
        parts.append(layer_error_plot(curves))
    for curve in curves:
        parts.append(f"<h3>{e(curve.label)}</h3><p>{e(curve.finding())}.</p>")
        parts.append(
            f'<p class="muted">{e(curve.source)}: {e(curve.note)}. Tolerance: SNR &ge; '
            f"{curve.snr_floor_db:g} dB. Search: {e(_method(curve))}.</p>"
        )
        parts.append(
            _table(
                ["depth", "node", "op", "max |err|", "rel err", "SNR dB"], _rows(curve), numeric={0, 3, 4, 5}
            )
        )
    for label, reason in sorted(missing.items()):
        parts.append(f'<p class="muted">{e(label)}: no per-layer curve: {e(reason)}.</p>')
    return "".join(parts) or '<p class="muted">No job of this run has a per-layer curve.</p>'
