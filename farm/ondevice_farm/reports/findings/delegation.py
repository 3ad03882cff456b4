"""What each runtime's delegate took and what it left to fallback kernels, from the compile reports.

A runtime with a delegate reports per op how many nodes the delegate took and how many stayed on
its own kernels (`compile.extra.delegation`); this holds whether or not the runtime can profile
per op (not every runtime's Python interpreter can), so the fallbacks of every runtime are named."""

from __future__ import annotations

from ondevice_farm.reports.compare import Column, Comparison
from ondevice_farm.reports.findings.base import Finding


def _left(column: Column) -> list[tuple[str, int]]:
    table = (column.compile.get("extra") or {}).get("delegation") or {}
    return [(op, int(row["fallback"])) for op, row in table.items() if int(row.get("fallback", 0))]


def delegate_fallbacks(comparison: Comparison) -> list[Finding]:
    """A delegate (XNNPACK) that left ops to fallback kernels on one runtime, set against the
    runtimes whose delegate took every node."""
    delegated = [c for c in comparison.ok_columns if c.delegation() is not None]
    whole = [c.label for c in delegated if not _left(c)]
    findings = []
    for column in delegated:
        left = _left(column)
        if not left:
            continue
        taken, fallback = column.delegation() or (0, 0)
        extra = column.compile.get("extra") or {}
        ops = ", ".join(f"{op} ({n})" for op, n in left)
        text = (
            f"{column.label}: {extra.get('delegate')} took {taken} of {taken + fallback} nodes and left "
            f"{ops} on {extra.get('fallback_kernels')} kernels"
        )
        if whole:
            text += f"; the delegate took every node on {', '.join(whole)}"
        findings.append(
            Finding(
                "delegate_fallbacks",
                0.2 + 0.3 * fallback / max(1, taken + fallback),
                text,
                {"column": column.label, "left": dict(left), "delegated": taken, "fallback": fallback},
            )
        )
    return findings
