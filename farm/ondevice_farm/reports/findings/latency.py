"""How fast, how steady, and what changed between two runs."""

from __future__ import annotations

from ondevice_farm.analysis.spread import spread_warnings
from ondevice_farm.reports.compare import Comparison
from ondevice_farm.reports.findings.base import Finding, pct

#: a coefficient of variation above this makes a p50 comparison shaky
UNSTABLE_CV = 0.15
#: two runs of one device and target differ when their p50s are this far apart
REGRESSION_RATIO = 0.10


def latency_gap(comparison: Comparison) -> list[Finding]:
    """The slowest column of the run against its fastest, at the warm median (a second run's
    columns are `run_regression`'s business)."""
    run_id = str(comparison.run.get("run_id"))
    p50 = {
        c.label: float(c.latency["p50"])
        for c in comparison.ok_columns
        if c.latency.get("p50") and (comparison.against is None or c.run_id == run_id)
    }
    if len(p50) < 2:
        return []
    fast = min(p50, key=lambda k: p50[k])
    slow = max(p50, key=lambda k: p50[k])
    ratio = p50[slow] / p50[fast]
    if ratio < 1.2:
        return []
    return [
        Finding(
            "latency_gap",
            min(0.9, 0.1 * ratio),
            (f"{slow} is {ratio:.1f}x slower than {fast} at p50 ({p50[slow]:.3f} ms vs {p50[fast]:.3f} ms)"),
            {"fastest": fast, "slowest": slow, "ratio": ratio, "p50_ms": p50},
        )
    ]


def unstable_latency(comparison: Comparison) -> list[Finding]:
    """Columns whose samples spread so much that their percentiles deserve care."""
    findings = []
    for column in comparison.ok_columns:
        robust = column.latency.get("mad_over_median")
        if robust is not None:
            # a job with robust spread recorded is judged by it and by its sessions, not by the cv
            for warning in spread_warnings(column.latency):
                findings.append(
                    Finding(
                        "unstable_latency",
                        0.1,
                        f"latency on {column.label}: {warning}",
                        {"column": column.label, "spread": column.latency.get("spread")},
                    )
                )
            continue
        cv = column.latency.get("cv")
        if cv is not None and float(cv) > UNSTABLE_CV:
            findings.append(
                Finding(
                    "unstable_latency",
                    0.1,
                    (
                        f"latency on {column.label} varies (cv {float(cv):.2f} over "
                        f"{len(column.samples_ms)} samples): "
                        "its percentiles are rough"
                    ),
                    {"column": column.label, "cv": float(cv)},
                )
            )
    return findings


def run_regression(comparison: Comparison) -> list[Finding]:
    """The same device and target in both runs, with p50s that moved."""
    if comparison.against is None:
        return []
    run_id = str(comparison.run.get("run_id"))
    first = {(c.device, c.target): c for c in comparison.ok_columns if c.run_id == run_id}
    findings = []
    for column in comparison.ok_columns:
        earlier = first.get((column.device, column.target))
        if column.run_id == run_id or earlier is None:
            continue
        a, b = float(earlier.latency.get("p50") or 0), float(column.latency.get("p50") or 0)
        if not a or not b:
            continue
        change = (a - b) / b
        if abs(change) >= REGRESSION_RATIO:
            word = "slower" if change > 0 else "faster"
            cvs = [float(c.latency.get("cv") or 0.0) for c in (earlier, column)]
            noisy = max(cvs) > UNSTABLE_CV
            which = "both runs are" if min(cvs) > UNSTABLE_CV else "a run is"
            caveat = (
                f"; {which} noisy (cv {cvs[0]:.2f} and {cvs[1]:.2f}): rerun before trusting it"
                if noisy
                else ""
            )
            findings.append(
                Finding(
                    "run_regression",
                    min(0.9, 0.3 + abs(change)) * (0.5 if noisy else 1.0),
                    (
                        f"{column.device} {column.target} is {pct(abs(change))} {word} in run {run_id} "
                        "than in "
                        f"{column.run_id} at p50 ({a:.3f} ms vs {b:.3f} ms){caveat}"
                    ),
                    {
                        "device": column.device,
                        "target": column.target,
                        "p50_ms": [a, b],
                        "change": change,
                        "cv": cvs,
                    },
                )
            )
    return findings
