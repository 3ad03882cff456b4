"""`farm compile`'s runtimes side by side: per target, what its delegate took and what it left.

One row per compiled target from its compile report: the delegate, the nodes it took and those
left on fallback kernels (each runtime's own, as its spec names them; ONNX Runtime's providers as
partitioned), partitions, and the artifact's size. Rows come in the order the targets were given.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ondevice_farm.compile.placement import short_provider


def runtime_row(target: str, report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one target's compile report that the runtimes share."""
    extra = report.get("extra") or {}
    delegation: dict[str, dict[str, int]] = extra.get("delegation") or {}
    size = extra.get("artifact_bytes", extra.get("package_bytes"))
    row: dict[str, Any] = {
        "target": target,
        "delegate": extra.get("delegate"),
        "delegated": None,
        "fallback": None,
        # without a delegate every node is on the runtime's own kernels: none was left behind
        "left": {op: n["fallback"] for op, n in delegation.items() if n.get("fallback")}
        if extra.get("delegate")
        else {},
        "partitions": report.get("partitions"),
        "nodes_after": report.get("nodes_after"),
        "artifact_bytes": size,
        "placement": {short_provider(k): v for k, v in (report.get("placement") or {}).items()},
    }
    if delegation:
        row["delegated"] = sum(n["delegated"] for n in delegation.values())
        row["fallback"] = sum(n["fallback"] for n in delegation.values())
    return row


def runtime_rows(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [runtime_row(e["target"], e["report"]) for e in reports if "report" in e]


def _nodes(row: dict[str, Any]) -> str:
    if row["delegated"] is not None:
        if not row["delegate"]:
            return f"0 / {row['fallback']}"
        return f"{row['delegated']} / {row['fallback']}"
    if row["placement"]:
        return ", ".join(f"{k} {v}" for k, v in sorted(row["placement"].items()))
    return "on the device"


def print_runtimes(console: Console, rows: list[dict[str, Any]]) -> None:
    """The table, when more than one runtime was compiled."""
    if len({row["target"].split("/")[0] for row in rows}) < 2:
        return
    table = Table(title="Runtimes side by side (compile reports)", title_justify="left")
    for name in ("target", "delegate", "delegated / fallback nodes", "partitions", "artifact KiB", "left"):
        table.add_column(name)
    for row in rows:
        size = row["artifact_bytes"]
        table.add_row(
            row["target"],
            row["delegate"] or "-",
            _nodes(row),
            str(row["partitions"] if row["partitions"] is not None else "-"),
            "-" if size is None else f"{size / 1024:.1f}",
            ", ".join(f"{op} {n}" for op, n in row["left"].items()) or "-",
        )
    console.print(table)
