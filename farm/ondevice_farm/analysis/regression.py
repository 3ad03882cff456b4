"""Did a job get worse than its baseline? The policy, numerics, placement, and a sample-level
latency test kept as a diagnostic.

The latency verdict of `farm nightly` is the session-level test (farm/ondevice_farm/analysis/session_test.py)
with error control across the suite (farm/ondevice_farm/analysis/multiple.py): `alpha` is the suite's
false-discovery level and `min_effect` the smallest slowdown worth a page (3% by default, so a
real 5% slowdown on a quiet device is caught). What follows is the diagnostic, which treats the
samples of one run as independent draws; it is not: latency state is fixed per session.

Diagnostic latency test: a one-sided Mann-Whitney U test (new samples larger than the baseline's), a bootstrap
confidence interval of the ratio of medians, and a minimum effect. A regression needs all
three: significant (p < alpha), the interval's low end above 1, and the median ratio at least
1 + min_effect (5% by default) — small, real slowdowns are not worth a page. Improvements are
reported the same way, mirrored.

Samples of one run cannot see noise *between* runs (a busy host, a warm phone, another
tenant), which shifts a whole run. Where the suite has history (the job's medians in its
previous runs), the run-to-run spread of those medians sets a noise floor as well: the log of
the ratio must exceed `between_run_z` robust standard deviations of the historical
run-to-run log ratios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT = 0.03
DEFAULT_CONFIDENCE = 0.95
DEFAULT_BOOTSTRAP = 2000
#: an SNR that falls by more than this many dB against the baseline is a numeric regression
DEFAULT_SNR_DROP_DB = 6.0
#: how many robust standard deviations of run-to-run drift a slowdown must exceed
DEFAULT_BETWEEN_RUN_Z = 3.0
#: rounds and unit time a changed job's paired rounds may take in a nightly (a night of many changed
#: models must still end by morning: 100 such jobs at the budget are 100 x 5 min of unit time)
DEFAULT_PAIRED_MAX_ROUNDS = 60
DEFAULT_PAIRED_BUDGET_S = 300.0
#: the history needs this many run-to-run ratios before it sets a noise floor
MIN_HISTORY_RATIOS = 3


@dataclass(frozen=True)
class RegressionPolicy:
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    confidence: float = DEFAULT_CONFIDENCE
    bootstrap: int = DEFAULT_BOOTSTRAP
    snr_drop_db: float = DEFAULT_SNR_DROP_DB
    between_run_z: float = DEFAULT_BETWEEN_RUN_Z
    paired_max_rounds: int = DEFAULT_PAIRED_MAX_ROUNDS
    paired_budget_s: float = DEFAULT_PAIRED_BUDGET_S
    seed: int = 0


@dataclass(frozen=True)
class LatencyVerdict:
    #: median(new) / median(baseline)
    ratio: float
    ci_low: float
    ci_high: float
    #: one-sided p-value that the new samples are larger
    p_slower: float
    #: one-sided p-value that the new samples are smaller
    p_faster: float
    regressed: bool
    improved: bool
    #: the smallest ratio the run-to-run history lets through (None: no history yet)
    noise_floor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "ci": [self.ci_low, self.ci_high],
            "p_slower": self.p_slower,
            "p_faster": self.p_faster,
            "regressed": self.regressed,
            "improved": self.improved,
            "noise_floor": self.noise_floor,
        }


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney_greater(a: np.ndarray, b: np.ndarray) -> float:
    """One-sided p-value of "b tends to be larger than a" (normal approximation, tie-corrected,
    continuity-corrected)."""
    n1, n2 = a.size, b.size
    values = np.concatenate([a, b])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(values.size, dtype=np.float64)
    sorted_values = values[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    average = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    u_b = ranks[n1:].sum() - n2 * (n2 + 1) / 2.0
    mean = n1 * n2 / 2.0
    n = n1 + n2
    tie_term = float((counts**3 - counts).sum()) / (n * (n - 1)) if n > 1 else 0.0
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if variance <= 0:
        return 0.5
    z = (u_b - mean - 0.5) / math.sqrt(variance)
    return _normal_sf(z)


def bootstrap_median_ratio(
    a: np.ndarray, b: np.ndarray, *, resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(b) / median(a), each sample resampled on its own."""
    rng = np.random.default_rng(seed)
    med_a = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    med_b = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    ratios = med_b / np.maximum(med_a, 1e-12)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def run_to_run_sigma(medians: list[float]) -> float | None:
    """Robust spread (1.4826 x median absolute value) of the log ratio between consecutive runs'
    medians, oldest first; None while the history is too short to tell."""
    values = np.log(np.asarray([m for m in medians if m and m > 0], dtype=np.float64))
    if values.size < MIN_HISTORY_RATIOS + 1:
        return None
    return float(1.4826 * np.median(np.abs(np.diff(values))))


def compare_latency(
    baseline: list[float],
    new: list[float],
    policy: RegressionPolicy | None = None,
    history: list[float] | None = None,
) -> LatencyVerdict:
    """`history`: the job's medians in earlier runs, oldest first (see `run_to_run_sigma`)."""
    policy = policy or RegressionPolicy()
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(new, dtype=np.float64)
    if a.size < 2 or b.size < 2:
        raise ValueError("a latency comparison needs at least 2 samples on each side")
    ratio = float(np.median(b) / max(float(np.median(a)), 1e-12))
    low, high = bootstrap_median_ratio(
        a, b, resamples=policy.bootstrap, confidence=policy.confidence, seed=policy.seed
    )
    p_slower = mann_whitney_greater(a, b)
    p_faster = mann_whitney_greater(b, a)
    sigma = run_to_run_sigma(history or [])
    floor = None if sigma is None else math.exp(policy.between_run_z * sigma)
    effect = max(1.0 + policy.min_effect, floor or 0.0)
    regressed = p_slower < policy.alpha and low > 1.0 and ratio >= effect
    improved = p_faster < policy.alpha and high < 1.0 and ratio <= 1.0 / effect
    return LatencyVerdict(ratio, low, high, p_slower, p_faster, regressed, improved, floor)


@dataclass(frozen=True)
class Finding:
    """One thing that changed for one job: kind is latency | numeric | placement."""

    kind: str
    message: str
    regression: bool
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "regression": self.regression,
            "details": self.details,
        }


def numeric_findings(
    baseline: dict[str, Any], new: dict[str, Any], policy: RegressionPolicy
) -> list[Finding]:
    """SNR drops of more than `snr_drop_db`, and a reference tolerance newly failed."""
    findings: list[Finding] = []
    base_ref, new_ref = baseline.get("reference") or {}, new.get("reference") or {}
    if base_ref.get("passed") and new_ref.get("passed") is False:
        findings.append(
            Finding(
                "numeric",
                "the reference tolerance is newly failed",
                True,
                {"tolerance": new_ref.get("tolerance")},
            )
        )
    base_out, new_out = base_ref.get("outputs") or {}, new_ref.get("outputs") or {}
    for name in sorted(set(base_out) & set(new_out)):
        before, after = base_out[name].get("snr_db"), new_out[name].get("snr_db")
        if before is None or after is None:
            continue
        if before - after > policy.snr_drop_db:
            findings.append(
                Finding(
                    "numeric",
                    f"SNR of {name} fell {before - after:.1f} dB ({before:.1f} -> {after:.1f})",
                    True,
                    {"output": name, "snr_db_before": before, "snr_db_after": after},
                )
            )
    return findings


def fallback_names(job: dict[str, Any]) -> set[str]:
    """The ops that fell back to the CPU: from a job document, or a nightly's kept view of one
    (`nightly/verdict_inputs.py`, which keeps the names only)."""
    if "fallback_op_names" in job:
        return set(job["fallback_op_names"])
    return {op["name"] for op in job.get("fallback_ops") or []}


def fusion_counts(job: dict[str, Any]) -> dict[str, int]:
    """Op type -> how many of it the compile fused, from a job document or a kept view."""
    if "fusion_counts" in job:
        return dict(job["fusion_counts"])
    return {f["op_type"]: f.get("after", 0) for f in (job.get("compile") or {}).get("fusions") or []}


def placement_findings(baseline: dict[str, Any], new: dict[str, Any]) -> list[Finding]:
    """New CPU fallbacks, and fusions the baseline had that the new run lost."""
    findings: list[Finding] = []
    before, after = fallback_names(baseline), fallback_names(new)
    if after - before:
        names = sorted(after - before)
        findings.append(
            Finding(
                "placement",
                f"{len(names)} op(s) newly fall back to the CPU: {', '.join(names[:5])}",
                True,
                {"new_fallbacks": names},
            )
        )
    base_fusions, new_fusions = fusion_counts(baseline), fusion_counts(new)
    lost = sorted(op for op, count in base_fusions.items() if new_fusions.get(op, 0) < count)
    if lost:
        findings.append(
            Finding(
                "placement",
                f"fusions lost: {', '.join(lost)}",
                True,
                {"lost_fusions": {op: [base_fusions[op], new_fusions.get(op, 0)] for op in lost}},
            )
        )
    return findings


def _latency_not_compared(baseline: dict[str, Any], new: dict[str, Any], before: int, after: int) -> Finding:
    """Why the latency test could not run: a side without per-run samples (a runner that prints
    percentiles only, such as onnxruntime_perf_test) or with fewer than two."""
    sides = [
        f"the {side} job has {count} per-run sample(s) ({job.get('runner') or 'unknown runner'})"
        for side, job, count in (("baseline", baseline, before), ("new", new, after))
        if count < 2
    ]
    return Finding(
        "latency",
        "latency not compared: " + " and ".join(sides) + "; the test needs at least 2 on each side",
        False,
        {"compared": False, "baseline_samples": before, "new_samples": after},
    )


def compare_jobs(
    baseline: dict[str, Any],
    new: dict[str, Any],
    policy: RegressionPolicy | None = None,
    history: list[float] | None = None,
) -> list[Finding]:
    """Everything that got worse (or better, for latency) from `baseline` to `new`, both ok jobs;
    `history`: the job's p50 in the suite's earlier runs, oldest first."""
    policy = policy or RegressionPolicy()
    findings: list[Finding] = []
    base_samples = (baseline.get("latency_ms") or {}).get("samples") or []
    new_samples = (new.get("latency_ms") or {}).get("samples") or []
    if len(base_samples) >= 2 and len(new_samples) >= 2:
        verdict = compare_latency(base_samples, new_samples, policy, history)
        if verdict.regressed or verdict.improved:
            p_value = min(verdict.p_slower, verdict.p_faster)
            word = "slower" if verdict.regressed else "faster"
            findings.append(
                Finding(
                    "latency",
                    f"median {verdict.ratio:.3f}x ({word}; {policy.confidence:.0%} CI "
                    f"{verdict.ci_low:.3f}-{verdict.ci_high:.3f}, p={p_value:.2g})",
                    verdict.regressed,
                    verdict.to_dict(),
                )
            )
    else:
        findings.append(_latency_not_compared(baseline, new, len(base_samples), len(new_samples)))
    findings += numeric_findings(baseline, new, policy)
    findings += placement_findings(baseline, new)
    return findings
