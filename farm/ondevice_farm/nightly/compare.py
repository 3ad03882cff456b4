"""A nightly run against its series, job by job: (model, device or unit asked for, target).

Each job is compared with its own baseline, the last run of the suite in which that job
succeeded (one failing job does not freeze the others' baselines), by the session-level test
(farm/ondevice_farm/analysis/session_test.py) over its stored history; the slowdown p-values of all compared
jobs are then adjusted together (Benjamini-Hochberg, farm/ondevice_farm/analysis/multiple.py), so the suite,
not each job, holds the false-alarm rate. The within-run sample test is kept as a diagnostic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.analysis.multiple import benjamini_hochberg
from ondevice_farm.analysis.paired import METHOD as PAIRED_METHOD
from ondevice_farm.analysis.paired import PairedPolicy, PairedVerdict, judge, stored_pairs
from ondevice_farm.analysis.paired_generation import MetricVerdict, is_generation_rounds, judge_generation
from ondevice_farm.analysis.regression import (
    Finding,
    RegressionPolicy,
    compare_latency,
    numeric_findings,
    placement_findings,
)
from ondevice_farm.analysis.session_test import (
    MIN_HISTORY_RUNS,
    LatencyCase,
    NotComparable,
    SessionComparison,
    compare_cases,
    compare_sessions,
)
from ondevice_farm.analysis.sessions import session_p50s

Key = tuple[str, str, str]
#: (run id, job document) of a job's earlier successful runs, oldest first
Series = list[tuple[str, dict[str, Any]]]


def job_key(job: dict[str, Any]) -> Key:
    return (job["model"]["name"], str(job.get("requested") or job["device"]), job["target"])


@dataclass(slots=True)  # one per job of a night: ~1 kB less each without a __dict__
class JobComparison:
    key: Key
    #: compared | failed | new | missing | no-baseline
    status: str
    findings: list[Finding] = field(default_factory=list)
    #: the run the job is compared with (its last success), where there is one
    baseline_run: str | None = None
    latency: SessionComparison | None = None
    p_adjusted: float | None = None
    p_faster_adjusted: float | None = None
    #: why the latency was not compared ("" where it was)
    reason: str = ""
    #: the within-run sample test (Mann-Whitney on the pooled samples): a diagnostic only
    diagnostic: dict[str, Any] | None = None
    verdict: str = "not compared"
    #: this run's headline p50 (ms), where the job measured one
    p50: float | None = None
    #: what the session-level test compares, where the latency can be compared
    case: LatencyCase | None = None
    #: which test judged the latency: "paired" (the artifact changed: its last good artifact ran
    #: interleaved with it tonight), "history" (the session-level test), "" (none)
    judged_by: str = ""
    paired: PairedVerdict | None = None
    #: a changed generation job's paired verdicts: TTFT and decode tokens/s (nightly/generation_verdict.py)
    paired_metrics: dict[str, MetricVerdict] | None = None

    @property
    def regression(self) -> bool:
        return self.status in ("failed", "missing") or any(f.regression for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        model, device, target = self.key
        latency = None
        if self.latency is not None:
            latency = {
                **self.latency.to_dict(),
                "p_adjusted": self.p_adjusted,
                "p_faster_adjusted": self.p_faster_adjusted,
            }
        return {
            "model": model,
            "device": device,
            "target": target,
            "status": self.status,
            "verdict": self.verdict,
            "regression": self.regression,
            "baseline_run": self.baseline_run,
            "reason": self.reason or None,
            "p50": self.p50,
            "latency": latency,
            "judged_by": self.judged_by or None,
            "paired": None if self.paired is None else self.paired.to_dict(),
            **(
                {"paired_metrics": {k: v.to_dict() for k, v in self.paired_metrics.items()}}
                if self.paired_metrics is not None
                else {}
            ),
            "diagnostic": self.diagnostic,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass
class Comparison:
    baseline_run: str | None
    jobs: list[JobComparison]
    policy: RegressionPolicy = field(default_factory=RegressionPolicy)

    @property
    def regressions(self) -> list[JobComparison]:
        return [j for j in self.jobs if j.regression]

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_run": self.baseline_run,
            "regressions": len(self.regressions),
            "method": {
                "test": "session-level Welch t on log session p50s with run-to-run drift from the history "
                "(Kalibera & Jones 2013)",
                "error_control": "benjamini-hochberg",
                "paired_test": PAIRED_METHOD + " (jobs whose artifact changed)",
                "alpha": self.policy.alpha,
                "min_effect": self.policy.min_effect,
                "confidence": self.policy.confidence,
                "compared": sum(1 for j in self.jobs if j.p_adjusted is not None),
            },
            "jobs": [j.to_dict() for j in self.jobs],
        }


def _has_latency(job: dict[str, Any]) -> bool:
    return bool(session_p50s(job.get("latency_ms") or {}))


def _diagnostic(old: dict[str, Any], now: dict[str, Any], policy: RegressionPolicy) -> dict[str, Any] | None:
    base = (old.get("latency_ms") or {}).get("samples") or []
    new = (now.get("latency_ms") or {}).get("samples") or []
    if len(base) < 2 or len(new) < 2:
        return None
    verdict = compare_latency(base, new, policy)
    return {
        "test": "mann-whitney on the pooled samples (diagnostic: treats samples as independent)",
        "ratio": verdict.ratio,
        "p_slower": verdict.p_slower,
        "ci": [verdict.ci_low, verdict.ci_high],
    }


def _compare_one(
    key: Key,
    now: dict[str, Any],
    series: Series,
    pinned: tuple[str, dict[str, Any] | None] | None,
    policy: RegressionPolicy,
) -> JobComparison:
    if pinned is not None:
        run_id, old = pinned
        if old is None:
            return JobComparison(key, "new", baseline_run=run_id, reason="not in the baseline run")
        if old["status"] != "ok":
            return JobComparison(key, "compared", baseline_run=run_id, reason="baseline failed")
        series = [(r, j) for r, j in series if r != run_id] + [(run_id, old)]
    if not series:
        return JobComparison(key, "new", reason="no history: no earlier run in which this job succeeded")
    baseline_run, old = series[-1]
    entry = JobComparison(key, "compared", baseline_run=baseline_run)
    entry.findings = numeric_findings(old, now, policy) + placement_findings(old, now)
    entry.diagnostic = _diagnostic(old, now, policy)
    rounds = (now.get("paired") or {}).get("rounds") or []
    if rounds and now.get("paired_baseline"):
        settings = now["paired_baseline"]
        paired_policy = PairedPolicy(settings["alpha"], settings["min_effect"])
        if is_generation_rounds(rounds):  # TTFT and decode rate, each its own test of the family
            entry.paired_metrics = judge_generation(rounds, paired_policy)
        else:
            entry.paired = judge(stored_pairs(rounds), paired_policy)
        entry.judged_by = "paired"
        entry.baseline_run = settings.get("run_id") or baseline_run
        return entry
    if not _has_latency(now) or not _has_latency(old):
        entry.reason = "no samples" if not _has_latency(now) else "no samples in the baseline"
        return entry
    case = LatencyCase(
        key[1], [session_p50s(j["latency_ms"]) for _, j in series], session_p50s(now["latency_ms"])
    )
    try:
        entry.latency = compare_sessions(case.series, case.new, confidence=policy.confidence)
        entry.case = case
    except NotComparable as exc:
        entry.reason = str(exc)
    return entry


def latency_verdict(
    ratio: float, p_slower_adjusted: float, p_faster_adjusted: float, policy: RegressionPolicy
) -> str:
    """regressed | improved | unchanged, from the suite-adjusted p-values and the minimum effect."""
    effect = 1.0 + policy.min_effect
    if p_slower_adjusted <= policy.alpha and ratio >= effect:
        return "regressed"
    if p_faster_adjusted <= policy.alpha and ratio <= 1.0 / effect:
        return "improved"
    return "unchanged"


def _judge(jobs: list[JobComparison], policy: RegressionPolicy) -> None:
    """Compare the latencies together (a device's jobs share its drift), adjust the p-values of
    those with an estimate of night-to-night drift across the suite, then give every job its
    verdict; a job whose drift is not estimated yet shows its numbers and waits for history."""
    cases = [j for j in jobs if j.case is not None]
    for entry, result in zip(
        cases, compare_cases([j.case for j in cases if j.case], policy.confidence), strict=True
    ):
        entry.latency = result
        if result.drift_from == "none":
            runs = len(entry.case.series) if entry.case else 0
            entry.reason = (
                f"history of {runs} run{'' if runs == 1 else 's'}: {MIN_HISTORY_RUNS} are needed to "
                "estimate night-to-night drift, so no verdict yet"
            )
    compared = [j for j in jobs if j.latency is not None and j.latency.drift_from != "none"]
    slower = benjamini_hochberg([j.latency.p_slower for j in compared if j.latency is not None])
    faster = benjamini_hochberg([j.latency.p_faster for j in compared if j.latency is not None])
    for entry, p_slow, p_fast in zip(compared, slower, faster, strict=True):
        entry.p_adjusted, entry.p_faster_adjusted = p_slow, p_fast
    for entry in compared:
        entry.judged_by = "history"
    for entry in jobs:
        latency = entry.latency
        if entry.status in ("failed", "missing"):
            entry.verdict = entry.status
        elif entry.paired is not None:
            _paired_verdict(entry)
        elif entry.paired_metrics is not None:
            _generation_verdict(entry)
        elif latency is None or entry.p_adjusted is None or entry.p_faster_adjusted is None or entry.reason:
            entry.verdict = "not compared"
        else:
            entry.verdict = latency_verdict(latency.ratio, entry.p_adjusted, entry.p_faster_adjusted, policy)
            if entry.verdict == "regressed":
                entry.findings.insert(0, _latency_finding(latency, entry.p_adjusted, True, policy))
            elif entry.verdict == "improved":
                entry.findings.insert(0, _latency_finding(latency, entry.p_faster_adjusted, False, policy))
        if entry.verdict in ("unchanged", "improved", "not compared") and any(
            f.regression for f in entry.findings
        ):
            entry.verdict = "regressed"


def _paired_verdict(entry: JobComparison) -> None:
    paired = entry.paired
    assert paired is not None
    entry.verdict = {"slower": "regressed", "faster": "improved", "same": "unchanged"}.get(
        paired.verdict, "inconclusive"
    )
    what = (
        f"p50 {paired.baseline_p50_ms:.3f} -> {paired.candidate_p50_ms:.3f} ms "
        f"({(paired.ratio - 1) * 100:+.1f}%; interval {paired.ci_low:.3f}-{paired.ci_high:.3f}x over "
        f"{paired.rounds} interleaved rounds with the last good artifact, paired test: {paired.verdict})"
    )
    if entry.verdict in ("regressed", "improved"):
        entry.findings.insert(0, Finding("latency", what, entry.verdict == "regressed", paired.to_dict()))
    else:
        entry.reason = what
    if entry.verdict != "regressed" and any(f.regression for f in entry.findings):
        entry.verdict = "regressed"


def _generation_verdict(entry: JobComparison) -> None:
    from ondevice_farm.nightly.generation_verdict import generation_nightly_verdict

    assert entry.paired_metrics is not None
    entry.verdict, finding, entry.reason = generation_nightly_verdict(entry.paired_metrics)
    if finding is not None:
        entry.findings.insert(0, finding)
    if entry.verdict != "regressed" and any(f.regression for f in entry.findings):
        entry.verdict = "regressed"


def _latency_finding(
    latency: SessionComparison, p_adjusted: float, slower: bool, policy: RegressionPolicy
) -> Finding:
    word = "slower" if slower else "faster"
    return Finding(
        "latency",
        f"p50 {latency.baseline_p50:.3f} -> {latency.new_p50:.3f} ms ({(latency.ratio - 1) * 100:+.1f}%, "
        f"{word}; {policy.confidence:.0%} CI {latency.ci_low:.3f}-{latency.ci_high:.3f}x, "
        f"adjusted p={p_adjusted:.2g})",
        slower,
        latency.to_dict(),
    )


def compare_runs(
    new: Iterable[dict[str, Any]],
    series: dict[Key, Series],
    policy: RegressionPolicy,
    *,
    previous: list[dict[str, Any]] | None = None,
    pinned_run: str | None = None,
    pinned_jobs: list[dict[str, Any]] | None = None,
) -> Comparison:
    """`new`: this run's jobs, each compared as it comes and not kept (a stream of the store's
    pages is fine); `series`: per job, its earlier successful runs, oldest first (its baseline
    last); `previous`: the suite's last run, whose jobs missing now are `missing`; `pinned_run`/
    `pinned_jobs`: a baseline run asked for, used for every job instead of its last success.
    Two jobs of one key: the later one is compared."""
    before = {job_key(j): j for j in previous or []}
    pinned = {job_key(j): j for j in pinned_jobs or []}
    entries: dict[Key, JobComparison] = {}
    for now in new:
        key = job_key(now)
        if now["status"] != "ok":
            pinned_ok = pinned.get(key, {}).get("status") == "ok"
            had = bool(series.get(key)) if pinned_run is None else pinned_ok
            reason = f"this run's job failed: {now.get('error')}"
            entries[key] = JobComparison(key, "failed" if had else "new", reason=reason)
        else:
            pin = None if pinned_run is None else (pinned_run, pinned.get(key))
            entry = _compare_one(key, now, series.get(key, []), pin, policy)
            entry.p50 = (now.get("latency_ms") or {}).get("p50")
            entries[key] = entry
    for key, job in before.items():
        if key not in entries and job["status"] == "ok":
            entries[key] = JobComparison(key, "missing", reason="in the last run, absent now")
    jobs = [entries[key] for key in sorted(entries)]
    _judge(jobs, policy)
    baseline_run = pinned_run or (previous[0]["run_id"] if previous else None)
    return Comparison(baseline_run, jobs, policy)
