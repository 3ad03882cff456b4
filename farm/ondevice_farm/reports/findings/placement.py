"""Where ops ran: CPU fallbacks and their cost, graphs split into many partitions."""

from __future__ import annotations

from ondevice_farm.reports.compare import Comparison
from ondevice_farm.reports.findings.base import Finding, pct
from ondevice_farm.reports.provenance import time_caveat

#: a graph split into more pieces than this pays a hand-over at each border
MANY_PARTITIONS = 3


def cpu_fallbacks(comparison: Comparison) -> list[Finding]:
    """Ops an accelerator target ran on the CPU, weighted by the share of op time they cost."""
    findings = []
    for column in comparison.ok_columns:
        if not column.fallbacks:
            continue
        share = column.fallback_share()
        largest = column.fallbacks[0]
        transfer_us = sum(f.transfer_us for f in column.fallbacks)
        count = "1 op falls" if len(column.fallbacks) == 1 else f"{len(column.fallbacks)} ops fall"
        if share is None or largest.time_us is None:
            text = (
                f"{count} back to CPU on {column.label} "
                f"({', '.join(f.name for f in column.fallbacks[:5])}); "
                "the recording shows the placement but no per-op time"
            )
        else:
            text = (
                f"{count} back to CPU on {column.label}, costing {pct(share)} of the op time; the "
                "largest "
                f"is {largest.name} ({largest.op_type}, {largest.time_us / 1000:.3f} ms)"
                f"{time_caveat(column.job)}"
            )
        if transfer_us:
            text += f"; copies around them add {transfer_us / 1000:.3f} ms"
        findings.append(
            Finding(
                "cpu_fallbacks",
                min(1.0, 0.2 + (share if share is not None else 0.3)),
                text,
                {
                    "column": column.label,
                    "count": len(column.fallbacks),
                    "share": share,
                    "transfer_us": transfer_us,
                    "ops": [
                        {
                            "name": f.name,
                            "op_type": f.op_type,
                            "time_us": f.time_us,
                            "transfer_us": f.transfer_us,
                        }
                        for f in column.fallbacks
                    ],
                },
            )
        )
    return findings


def many_partitions(comparison: Comparison) -> list[Finding]:
    """An accelerator graph cut into many partitions: each border is a hand-over to the CPU and back."""
    findings = []
    for column in comparison.ok_columns:
        partitions = int(column.compile.get("partitions") or 0)
        if partitions > MANY_PARTITIONS and not column.target.endswith("/cpu"):
            findings.append(
                Finding(
                    "many_partitions",
                    0.3,
                    (
                        f"the graph is split into {partitions} partitions on {column.label}: every "
                        "border is a "
                        "hand-over between backends"
                    ),
                    {"column": column.label, "partitions": partitions},
                )
            )
    return findings
