"""Jobs that produced nothing to compare."""

from __future__ import annotations

from ondevice_farm.reports.compare import Comparison
from ondevice_farm.reports.findings.base import Finding


def job_failed(comparison: Comparison) -> list[Finding]:
    """A failed job: its column is empty, and its error is the first thing to read."""
    return [
        Finding(
            "job_failed",
            1.0,
            f"{c.label} failed: {c.error or c.job.get('error_type') or 'no error recorded'}",
            {"column": c.label, "error": c.error, "error_type": c.job.get("error_type")},
        )
        for c in comparison.columns
        if not c.ok
    ]
