"""The report's "Numerics per output" section: each job's verdict per output with the metrics of
its kind, the SNR plot, the host fp16 prediction beside it, and why a job was not compared."""

from __future__ import annotations

from typing import Any

from ondevice_farm.analysis.reference_state import FAILED, PASSED, reference_state
from ondevice_farm.reports import svg
from ondevice_farm.reports.document import Report
from ondevice_farm.reports.html_sections import _num, _table, e


def _predictions(predicted: dict[str, dict[str, float]]) -> str:
    lines = [
        f"host {e(precision)} prediction for {e(name)}: {snr:.1f} dB"
        for precision, outputs in sorted(predicted.items())
        for name, snr in sorted(outputs.items())
    ]
    if not lines:
        return ""
    return (
        f'<p class="muted">{"; ".join(lines)} (predicted on the host by the farm\'s MIL executor from the '
        "fp32 reference inputs; not measured on a device).</p>"
    )


def _verdict_cell(o: dict[str, Any]) -> str:
    if o.get("passed") is None:
        return "-"
    if o["passed"]:
        return '<span class="pass">pass</span>'
    return f'<span class="fail">FAIL</span> {e(o.get("reason") or "")}'


def _exactness(o: dict[str, Any]) -> str:
    """Integer, bool and string outputs: mismatches; float outputs: values outside allclose and
    non-finite values on the device."""
    if "mismatches" in o:
        return f"{o['mismatches']} of {o.get('elements', '?')} differ"
    bad = sum(int(v) for v in ((o.get("nonfinite") or {}).get("actual") or {}).values())
    outside = o.get("outside")
    text = "-" if outside is None else f"{outside} outside allclose"
    return text + (f", {bad} non-finite" if bad else "")


def _not_compared(report: Report) -> str:
    lines = [
        f"{e(c.label)}: {e(state.reason)}"
        for c in report.columns
        if c.ok and (state := reference_state(c.job)).state not in (PASSED, FAILED)
    ]
    if not lines:
        return ""
    return f'<p class="muted">Not compared with the reference: {"; ".join(lines)}.</p>'


def numerics(report: Report) -> str:
    columns = report.columns
    ok = [c for c in columns if c.ok and c.outputs()]
    outputs = sorted({name for c in ok for name in c.outputs()})
    if not outputs:
        return '<p class="muted">No job compared outputs against the reference.</p>' + _not_compared(report)
    rows = []
    for name in outputs:
        for c in ok:
            o = c.outputs().get(name)
            if o is None:
                continue
            topk = o.get("topk") or {}
            agreement = (
                "-"
                if not topk
                else f"top-1 {'same' if topk.get('top1_match') else 'DIFFERENT'}, "
                f"top-5 overlap {float(topk.get('top5_overlap', 0)):.0%}"
            )
            rows.append(
                [
                    e(name),
                    e(c.label),
                    e(c.precision or "-"),
                    e(o.get("kind") or "float"),
                    _num(o.get("snr_db"), 1),
                    "-" if o.get("max_abs") is None else f"{o['max_abs']:.2e}",
                    "-" if o.get("rmse") is None else f"{o['rmse']:.2e}",
                    _num(o.get("cosine"), 6),
                    _exactness(o),
                    agreement,
                    _verdict_cell(o),
                ]
            )
    plot = svg.snr_plot(
        outputs, [(c.label, [c.outputs().get(n, {}).get("snr_db") for n in outputs]) for c in ok]
    )
    table = _table(
        [
            "output",
            "job",
            "precision",
            "kind",
            "SNR dB",
            "max |err|",
            "rmse",
            "cosine",
            "exactness",
            "top-k agreement",
            "verdict",
        ],
        rows,
        numeric={4, 5, 6, 7},
    )
    note = ""
    if not any(o.get("topk") for c in ok for o in c.outputs().values()):
        note = (
            '<p class="muted">Top-1/top-5 agreement needs the top-k indices in the job document; '
            "these jobs did not record them.</p>"
        )
    return plot + table + _predictions(report.comparison.predicted_snr_db) + note + _not_compared(report)
