"""The HTML section of a PyTorch source: the ONNX export and both CoreML routes, against eager."""

from __future__ import annotations

from html import escape
from typing import Any

from ondevice_farm.reports.routes import ROUTE_COLUMNS, export_row, onnx_export_text, route_cells
from ondevice_farm.runtimes.coreml.compile.routes import ROUTE_LABELS


def _row(cells: list[str]) -> str:
    return "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"


def routes_section(source: dict[str, Any]) -> str:
    export = source.get("onnx_export") or {}
    intro = (
        f"<p>Checkpoint {escape(str(source.get('path')))} ({escape(str(source.get('format')))}, sha256 "
        f"{escape(str(source.get('sha256'))[:12])}, torch {escape(str(source.get('torch_version')))}); "
        f"reference: {escape(str(source.get('reference')))}; {escape(onnx_export_text(export))}"
        + "".join(f"; not used: {escape(r)}" for r in export.get("fallbacks") or [])
        + ".</p>"
    )
    study = source.get("routes") or {}
    if "error" in study:
        return intro + f'<p class="muted">CoreML routes not compared: {escape(study["error"])}</p>'
    head = list(ROUTE_COLUMNS)
    rows = []
    check = (source.get("export_check") or {}).get("outputs")
    if check is not None:
        rows.append(_row(export_row(check)))
    predicted = study.get("predicted") or {}
    for key in ("onnx", "torch"):
        summary = study.get(key)
        if summary is None:
            continue
        if "error" in summary:
            rows.append(_row([ROUTE_LABELS[key], "refused", "-", "-", "-", "-", "-", "-", summary["error"]]))
            continue
        rows.append(_row(route_cells(ROUTE_LABELS[key], summary, predicted.get(key))))
    table = (
        "<div class=scroll><table><thead><tr>"
        + "".join(f"<th>{escape(h)}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )
    diff = study.get("op_differences") or {}
    ops = ""
    if diff:
        ops = (
            "<p>MIL op counts that differ (ONNX route vs PyTorch route): "
            + escape(", ".join(f"{op} {c['onnx']} vs {c['torch']}" for op, c in diff.items()))
            + ".</p>"
        )
    refusals = [r for key in ("onnx", "torch") for r in (study.get(key) or {}).get("refusals") or []]
    refused = "".join(f'<p class="muted">coremltools refused the {escape(r)}</p>' for r in refusals)
    note = f'<p class="muted">{escape(str(study.get("prediction_note", "")))}</p>'
    return intro + table + ops + refused + note
