"""What compilation did differently per target."""

from __future__ import annotations

from ondevice_farm.compile.precision import dominant
from ondevice_farm.reports.compare import Comparison, fusion_differences
from ondevice_farm.reports.findings.base import Finding


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
        # a delegating runtime counts kernels (a delegate call is one), not graph nodes: what its
        # delegate took is `delegate_fallbacks`'s (findings/delegation.py)
        if c.compile.get("nodes_after") is not None and not (c.compile.get("extra") or {}).get("delegation")
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


def precision_differs(comparison: Comparison) -> list[Finding]:
    """An op group one target computes in int8 and another in float, or not as the source model
    asks ("coreml/gpu runs conv in fp16; ort/cpu runs conv in int8"), from the compile reports."""
    by_group: dict[str, dict[str, str]] = {}
    source: dict[str, str] = {}
    for column in comparison.ok_columns:
        for group, counts in (column.compile.get("op_precision") or {}).items():
            if counts:
                by_group.setdefault(group, {})[column.label] = dominant(counts)
        for group, counts in (column.compile.get("source_op_precision") or {}).items():
            if counts:
                source[group] = dominant(counts)
    findings = []
    for group, per_target in sorted(by_group.items()):
        precisions = set(per_target.values())
        # int8 against float only: fp16 against fp32 is the whole artifact's, which
        # reduced_precision already weighs, and would repeat here for every group
        targets_differ = "int8" in precisions and len(precisions) > 1
        off_source = group in source and any((p == "int8") != (source[group] == "int8") for p in precisions)
        if not (targets_differ or off_source):
            continue
        kinds: dict[str, list[str]] = {}
        for label, precision in per_target.items():
            kinds.setdefault(precision, []).append(label)
        text = "; ".join(
            f"{', '.join(labels)} run{'s' if len(labels) == 1 else ''} {group} in {precision}"
            for precision, labels in sorted(kinds.items())
        )
        evidence: dict[str, object] = {"op_group": group, "precision": per_target}
        if group in source:
            evidence["source"] = source[group]
            if source[group] not in kinds:
                text += f"; the source model has it in {source[group]}"
        # a whole-network group (conv, matmul) in int8 on one target and float on another explains drift
        weight = 0.3 if group in ("conv", "matmul") else 0.1
        findings.append(Finding("precision_differs", weight, text, evidence))
    return findings
