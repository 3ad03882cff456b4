"""A PyTorch source's routes in a terminal: the ONNX export and both CoreML routes, against eager.

Rows say how each figure was obtained: the export on ONNX Runtime is measured on the host, the
CoreML routes' numbers are predicted by the host MIL executor, not measured on a device.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ondevice_farm.runtimes.coreml.compile.routes import ROUTE_LABELS


def _worst(outputs: dict[str, dict[str, float]] | None, key: str, pick: Any) -> str:
    values = [float(o[key]) for o in (outputs or {}).values() if o.get(key) is not None]
    return "-" if not values else f"{pick(values):.3g}"


def onnx_export_text(export: dict[str, Any]) -> str:
    """How the checkpoint became ONNX, or the export's refusal (then no target reads ONNX)."""
    if "refused" in export:
        return f"no ONNX: torch.onnx.export refused it ({export['refused']})"
    return f"ONNX by the {export.get('exporter')} exporter, opset {export.get('opset')}"


def print_source(console: Console, source: dict[str, Any]) -> None:
    export = source.get("onnx_export") or {}
    console.print(
        f"[bold]PyTorch source[/bold] {escape(str(source.get('path')))} ({source.get('format')}, sha256 "
        f"{str(source.get('sha256'))[:12]}, torch {source.get('torch_version')}); "
        + escape(onnx_export_text(export))
    )
    for reason in export.get("fallbacks") or []:
        console.print(f"  [dim]not used: {reason}[/dim]")


def _route_row(name: str, summary: dict[str, Any], predicted: dict[str, Any] | None) -> list[str]:
    if "error" in summary:
        return [name, "refused", "-", "-", "-", "-", "-", "-", "-", summary["error"][:60]]
    top = sorted(summary["op_types"].items(), key=lambda kv: -kv[1])[:4]
    return [*route_cells(name, summary, predicted), ", ".join(f"{op} {n}" for op, n in top)]


def route_cells(name: str, summary: dict[str, Any], predicted: dict[str, Any] | None) -> list[str]:
    """A converted route's row in ROUTE_COLUMNS order (its SNR and error predicted on the host)."""
    outputs = (predicted or {}).get("outputs")
    return [
        name,
        str(summary.get("frontend")),
        str(summary["mil_ops"]),
        str(summary["casts"]),
        str(summary["precision"]),
        "/".join(summary.get("output_dtypes") or []) or "-",
        f"{summary['package_bytes'] / 1024:.1f}",
        _worst(outputs, "snr_db", min) + (" (predicted)" if outputs else ""),
        _worst(outputs, "max_abs", max),
    ]


#: the columns both views of the routes comparison show (the terminal adds the top ops)
ROUTE_COLUMNS = (
    "route",
    "frontend",
    "MIL ops",
    "casts",
    "precision",
    "outputs",
    "KiB",
    "worst SNR dB",
    "max |err|",
)


def export_row(outputs: dict[str, Any] | None) -> list[str]:
    """The ONNX export's own row (ORT CPU against eager, measured), in ROUTE_COLUMNS order."""
    return [
        "ONNX export on ORT CPU",
        "onnx",
        "-",
        "-",
        "fp32",
        "-",
        "-",
        _worst(outputs, "snr_db", min) + " (measured)",
        _worst(outputs, "max_abs", max),
    ]


def routes_table(study: dict[str, Any], export_check: dict[str, Any] | None = None) -> Table:
    table = Table(
        title="One checkpoint, two CoreML routes (against PyTorch eager fp32)", title_justify="left"
    )
    for column in (*ROUTE_COLUMNS, "top ops"):
        table.add_column(column, justify="left" if column in ("route", "frontend", "top ops") else "right")
    if export_check is not None:
        table.add_row(*export_row(export_check.get("outputs")), "")
    predicted = study.get("predicted") or {}
    for key in ("onnx", "torch"):
        if key in study:
            table.add_row(*_route_row(ROUTE_LABELS[key], study[key], predicted.get(key)))
    return table


def print_routes_table(console: Console, table: Table) -> None:
    """The routes table, dealt over narrower tables that repeat the route where it is wider than
    the terminal (as the run summary is), so no cell is cut."""
    from ondevice_farm.reports.fit import fit_table

    for part in fit_table(console, table, console.width, keep=1):
        console.print(part)


def print_routes(console: Console, backend: str, comparison: dict[str, Any]) -> None:
    """`farm compile`: both routes of one backend, and the op types whose counts differ."""
    print_routes_table(console, routes_table(comparison))
    for key in ("onnx", "torch"):
        for line in comparison[key].get("refusals") or []:
            console.print(f"  [yellow]coremltools refused[/yellow] {line}")
        for line in comparison[key].get("warnings") or []:
            console.print(f"  [dim]coremltools warns: {line}[/dim]")
    fused = comparison["onnx"].get("fusions") or []
    if fused:
        console.print(f"  coremltools' passes on the ONNX route's program: {', '.join(fused)}")
    diff = comparison.get("op_differences") or {}
    if diff:
        console.print(
            f"  coreml/{backend} vs coreml-torch/{backend}, MIL ops that differ: "
            + ", ".join(f"{op} {c['onnx']} vs {c['torch']}" for op, c in diff.items())
        )
