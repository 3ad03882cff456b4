"""Why the targets differ: small named rules over a `Comparison`, each giving ranked findings.

Each rule is a plain function `Comparison -> list[Finding]`; `RULES` lists them in no particular
order, and `find` ranks what they say by weight (how much of the difference it explains)."""

from __future__ import annotations

from ondevice_farm.reports.compare import Comparison
from ondevice_farm.reports.findings.base import Finding, Rule
from ondevice_farm.reports.findings.compile import fusion_only_on, node_count_gap, precision_differs
from ondevice_farm.reports.findings.delegation import delegate_fallbacks
from ondevice_farm.reports.findings.jobs import job_failed
from ondevice_farm.reports.findings.latency import latency_gap, run_regression, unstable_latency
from ondevice_farm.reports.findings.numerics import (
    reduced_precision,
    reference_failed,
    reference_not_compared,
    topk_disagreement,
)
from ondevice_farm.reports.findings.placement import cpu_fallbacks, many_partitions
from ondevice_farm.reports.findings.routes import route_divergence

RULES: tuple[Rule, ...] = (
    job_failed,
    reference_failed,
    reference_not_compared,
    topk_disagreement,
    cpu_fallbacks,
    delegate_fallbacks,
    many_partitions,
    latency_gap,
    run_regression,
    reduced_precision,
    fusion_only_on,
    node_count_gap,
    precision_differs,
    unstable_latency,
    route_divergence,
)


def find(comparison: Comparison, rules: tuple[Rule, ...] = RULES, limit: int | None = None) -> list[Finding]:
    findings = [f for rule in rules for f in rule(comparison)]
    ranked = sorted(findings, key=lambda f: -f.weight)
    return ranked if limit is None else ranked[:limit]


__all__ = ["RULES", "Finding", "Rule", "find"]
