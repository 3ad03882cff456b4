"""What compilation did differently per target."""

from __future__ import annotations

from farm.reports.compare import Comparison, fusion_differences
from farm.reports.findings.base import Finding


def fusion_only_on(comparison: Comparison) -> list[Finding]:
    """A fused op type that appeared on some targets' compiled graphs and not on others."""
    findings = []
    for op_type, fired, missing in fusion_differences(comparison.columns):
        where = ", ".join(fired)
        findings.append(
            Finding(
                "fusion_only_on",
                0.25,
                f"{op_type} fused on {where} only (not on {', '.join(missing)})",
                {"op_type": op_type, "fired": fired, "not_fired": missing},
            )
        )
    return findings


def node_count_gap(comparison: Comparison) -> list[Finding]:
    """Targets whose compiled graphs differ a lot in size: one kept what another fused away."""
    counts = {
        c.label: int(c.compile["nodes_after"])
        for c in comparison.ok_columns
        if c.compile.get("nodes_after") is not None
    }
    if len(counts) < 2:
        return []
    low = min(counts, key=lambda k: counts[k])
    high = max(counts, key=lambda k: counts[k])
    if counts[high] < 2 * max(counts[low], 1):
        return []
    return [
        Finding(
            "node_count_gap",
            0.15,
            (f"{high} runs {counts[high]} nodes after compiling, {low} only {counts[low]}"),
            {"nodes_after": counts},
        )
    ]
