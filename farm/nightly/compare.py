"""A nightly run against its baseline, job by job: (model, device or unit asked for, target)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from farm.analysis.regression import Finding, RegressionPolicy, compare_jobs


def job_key(job: dict[str, Any]) -> tuple[str, str, str]:
    return (job["model"]["name"], str(job.get("requested") or job["device"]), job["target"])


@dataclass
class JobComparison:
    key: tuple[str, str, str]
    status: str  # compared | failed | new | missing | no-baseline
    findings: list[Finding] = field(default_factory=list)

    @property
    def regression(self) -> bool:
        return self.status in ("failed", "missing") or any(f.regression for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        model, device, target = self.key
        return {
            "model": model,
            "device": device,
            "target": target,
            "status": self.status,
            "regression": self.regression,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass
class Comparison:
    baseline_run: str | None
    jobs: list[JobComparison]

    @property
    def regressions(self) -> list[JobComparison]:
        return [j for j in self.jobs if j.regression]

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_run": self.baseline_run,
            "regressions": len(self.regressions),
            "jobs": [j.to_dict() for j in self.jobs],
        }


def medians_by_key(runs: list[list[dict[str, Any]]]) -> dict[tuple[str, str, str], list[float]]:
    """Each job's p50 across runs given oldest first: the history behind the noise floor."""
    history: dict[tuple[str, str, str], list[float]] = {}
    for jobs in runs:
        for job in jobs:
            if job["status"] == "ok" and (job.get("latency_ms") or {}).get("p50"):
                history.setdefault(job_key(job), []).append(float(job["latency_ms"]["p50"]))
    return history


def compare_runs(
    baseline_run: str | None,
    baseline: list[dict[str, Any]],
    new: list[dict[str, Any]],
    policy: RegressionPolicy,
    history: dict[tuple[str, str, str], list[float]] | None = None,
) -> Comparison:
    """`failed`: ok in the baseline, failed now. `missing`: in the baseline, absent now."""
    before = {job_key(j): j for j in baseline}
    after = {job_key(j): j for j in new}
    jobs: list[JobComparison] = []
    for key in sorted(set(before) | set(after)):
        old, now = before.get(key), after.get(key)
        if now is None:
            jobs.append(JobComparison(key, "missing" if old and old["status"] == "ok" else "new"))
        elif old is None or baseline_run is None:
            jobs.append(JobComparison(key, "no-baseline" if baseline_run is None else "new"))
        elif now["status"] != "ok":
            jobs.append(JobComparison(key, "failed" if old["status"] == "ok" else "compared"))
        elif old["status"] != "ok":
            jobs.append(JobComparison(key, "new"))
        else:
            jobs.append(
                JobComparison(key, "compared", compare_jobs(old, now, policy, (history or {}).get(key)))
            )
    return Comparison(baseline_run, jobs)
