"""A generation pair's verdict on TTFT and decode tokens/s: both oriented so that above 1 is B
slower, each one test of the family (Bonferroni over the two), the pair slower when either is."""

from __future__ import annotations

import math
import random

import pytest

from ondevice_farm.analysis.paired import PairedPolicy, PairedVerdict
from ondevice_farm.analysis.paired_generation import (
    DECODE_RATE,
    TTFT,
    generation_family,
    judge_generation,
    overall_verdict,
)
from ondevice_farm.analysis.regression import RegressionPolicy
from ondevice_farm.nightly.compare import JobComparison, compare_runs, job_key
from ondevice_farm.nightly.report import notes, row

from .test_student_t import quantile


def _rounds(
    ttft_ratio: float, decode_ratio: float, n: int = 12, spread: float = 0.01
) -> list[dict[str, float]]:
    """B's TTFT `ttft_ratio` times A's and B's decode rate `decode_ratio` times A's, with a small
    shared-and-own noise per round (seeded)."""
    rng = random.Random(7)
    rounds = []
    for _ in range(n):
        drift = math.exp(rng.gauss(0, 0.05))  # shared by both sides of a round: cancels
        a_ttft, a_rate = 2.0 * drift, 1000.0 / drift
        rounds.append(
            {
                "baseline_ttft_ms": a_ttft * math.exp(rng.gauss(0, spread)),
                "candidate_ttft_ms": a_ttft * ttft_ratio * math.exp(rng.gauss(0, spread)),
                "baseline_decode_tokens_per_s": a_rate * math.exp(rng.gauss(0, spread)),
                "candidate_decode_tokens_per_s": a_rate * decode_ratio * math.exp(rng.gauss(0, spread)),
            }
        )
    return rounds


def test_a_slower_decode_reads_as_slower_with_its_ratio_a_over_b() -> None:
    policy = generation_family(PairedPolicy(), pairs=1)
    verdicts = judge_generation(_rounds(1.0, 1 / 1.3), policy)
    assert verdicts[TTFT].paired.verdict == "same"
    decode = verdicts[DECODE_RATE]
    assert decode.paired.verdict == "slower" and math.isclose(decode.paired.ratio, 1.3, rel_tol=0.02)
    assert decode.candidate < decode.baseline  # tokens/s, in the metric's own unit
    assert overall_verdict([v.paired.verdict for v in verdicts.values()]) == "slower"


def test_a_longer_ttft_is_slower_and_a_faster_pair_needs_no_metric_slower() -> None:
    policy = generation_family(PairedPolicy(), pairs=1)
    slower = judge_generation(_rounds(1.25, 1.0), policy)
    assert slower[TTFT].paired.verdict == "slower" and slower[TTFT].candidate > slower[TTFT].baseline
    faster = judge_generation(_rounds(0.8, 1.0), policy)
    assert [faster[TTFT].paired.verdict, faster[DECODE_RATE].paired.verdict] == ["faster", "same"]
    assert overall_verdict(["faster", "same"]) == "faster"
    assert overall_verdict(["faster", "inconclusive"]) == "inconclusive"
    assert overall_verdict(["same", "same"]) == "same"


def test_bonferroni_over_pairs_and_the_two_metrics() -> None:
    assert generation_family(PairedPolicy(alpha=0.01), pairs=3).alpha == 0.01 / 6


def _half_width(verdict: PairedVerdict) -> float:
    return (math.log(verdict.ci_high) - math.log(verdict.ci_low)) / 2.0


def _expected_half_width(verdict: PairedVerdict, alpha: float) -> float:
    """The paired interval's half-width at `alpha` (docs/compare.md), with the closed-form t."""
    n = verdict.rounds
    spend = alpha * 5 / (n * (n + 1))
    return quantile(1.0 - spend / 2.0, n - 1) * verdict.sd_log_ratio / math.sqrt(n)


def test_each_metric_is_the_paired_interval_at_half_the_pairs_alpha() -> None:
    """Each metric's interval is the fixed graph's interval (its error rates: test_paired_error_rates.py)
    built at alpha / 2 of the pair's share: t_{1 - a_n/2, n-1} * sd / sqrt(n), a_n = (alpha / 2) * 5 /
    (n (n + 1)), the quantile from the closed-form t."""
    verdicts = judge_generation(_rounds(1.0, 1.0, spread=0.05), generation_family(PairedPolicy(), pairs=1))
    for verdict in verdicts.values():
        assert verdict.paired.alpha == 0.005
        assert _half_width(verdict.paired) == pytest.approx(
            _expected_half_width(verdict.paired, 0.005), rel=1e-7
        )


def _job(rounds: list[dict[str, float]] | None = None) -> dict[str, object]:
    job: dict[str, object] = {"model": {"name": "llama"}, "requested": "host-cpu", "target": "ort/cpu"}
    job.update(status="ok", artifact_sha256="b" if rounds else "a", latency_ms={})
    if rounds is not None:
        job["paired"] = {"seed": 1, "stopped": "decided", "rounds": [{"order": "AB", **r} for r in rounds]}
        job["paired_baseline"] = {"artifact_sha256": "a", "run_id": "r1", "alpha": 0.005, "min_effect": 0.03}
    return job


def test_the_nightly_judges_a_changed_generation_job_on_both_metrics() -> None:
    """Stored rounds with both sides' TTFT and decode rate: the job regresses when either metric is
    slower, and its table row and reason name the figures."""
    slower_decode = _compare(_rounds(1.0, 1 / 1.3))
    assert slower_decode.judged_by == "paired" and slower_decode.verdict == "regressed"
    assert slower_decode.paired is None and slower_decode.paired_metrics is not None
    assert "decode" in slower_decode.findings[0].message and slower_decode.findings[0].regression
    assert row(slower_decode).split()[-2:] == ["paired", "regressed"]
    same = _compare(_rounds(1.0, 1.0))
    assert same.verdict == "unchanged" and "TTFT" in notes(same)[0] and "decode" in notes(same)[0]
    assert same.to_dict()["paired_metrics"]["decode_tokens_per_s"]["verdict"] == "same"
    # judged at the alpha the night stored for the test (its share of the family), not the default
    assert same.paired_metrics is not None
    for verdict in same.paired_metrics.values():
        assert verdict.paired.alpha == 0.005
        assert _half_width(verdict.paired) == pytest.approx(
            _expected_half_width(verdict.paired, 0.005), rel=1e-7
        )


def test_the_nightly_judges_a_changed_fixed_graph_at_its_stored_alpha() -> None:
    """A changed fixed graph's stored rounds: judged by the paired test at the alpha the night stored
    (0.002: one of five tests), with the interval that alpha gives."""
    rng = random.Random(3)
    rounds = [
        {"baseline_p50_ms": 2.0, "candidate_p50_ms": 2.0 * math.exp(rng.gauss(0.1, 0.02))} for _ in range(9)
    ]
    now = _job()
    now.update(artifact_sha256="b")
    now["paired"] = {"seed": 1, "stopped": "decided", "rounds": [{"order": "AB", **r} for r in rounds]}
    now["paired_baseline"] = {"artifact_sha256": "a", "run_id": "r1", "alpha": 0.002, "min_effect": 0.03}
    old = _job()
    (entry,) = compare_runs([now], {job_key(old): [("r1", old)]}, RegressionPolicy()).jobs
    assert entry.judged_by == "paired" and entry.verdict == "regressed" and entry.paired is not None
    assert entry.paired.alpha == 0.002 and entry.paired.rounds == 9
    assert _half_width(entry.paired) == pytest.approx(_expected_half_width(entry.paired, 0.002), rel=1e-7)


def _compare(rounds: list[dict[str, float]]) -> JobComparison:
    old = _job()
    comparison = compare_runs([_job(rounds)], {job_key(old): [("r1", old)]}, RegressionPolicy())
    (entry,) = comparison.jobs
    return entry
