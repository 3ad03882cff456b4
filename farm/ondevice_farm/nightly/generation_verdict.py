"""A changed generation job's nightly verdict: TTFT and decode tokens/s, each by the paired test.

A suite entry with `generate:` whose folder changed since its last success runs its last good folder
(A) beside tonight's (B) in interleaved rounds, as a fixed graph's changed job does
(farm/ondevice_farm/nightly/paired.py); its rounds carry both sides' TTFT and decode rate, and each
metric is one test of the night's Bonferroni family (farm/ondevice_farm/analysis/paired_generation.py).
The job regresses when either metric is `slower`; an unchanged folder keeps the history test of its
per-token decode latency.
"""

from __future__ import annotations

from collections.abc import Mapping

from ondevice_farm.analysis.paired_generation import (
    DECODE_RATE,
    GENERATION_METRICS,
    TTFT,
    MetricVerdict,
    overall_verdict,
)
from ondevice_farm.analysis.regression import Finding

#: the paired verdict as a nightly job's verdict
NIGHTLY_VERDICTS = {"slower": "regressed", "faster": "improved", "same": "unchanged"}


def _figure(metric: str, value: float) -> str:
    return f"{value:.3f} ms" if metric == TTFT else f"{value:.1f} tokens/s"


def describe(verdict: MetricVerdict) -> str:
    """One metric's line: A -> B, the ratio oriented so that above 1 is B slower, its interval."""
    paired, name = verdict.paired, {TTFT: "TTFT", DECODE_RATE: "decode"}[verdict.metric]
    ratio = "B/A" if verdict.metric == TTFT else "A/B"
    return (
        f"{name} {_figure(verdict.metric, verdict.baseline)} -> {_figure(verdict.metric, verdict.candidate)} "
        f"({ratio} {paired.ratio:.3f}, interval {paired.ci_low:.3f}-{paired.ci_high:.3f}x: {paired.verdict})"
    )


def generation_nightly_verdict(metrics: Mapping[str, MetricVerdict]) -> tuple[str, Finding | None, str]:
    """(the job's verdict, its latency finding where it regressed or improved, the reason line
    otherwise) from its metrics' paired verdicts."""
    verdict = NIGHTLY_VERDICTS.get(overall_verdict([metrics[m].paired.verdict for m in GENERATION_METRICS]))
    rounds = metrics[TTFT].paired.rounds
    what = (
        "; ".join(describe(metrics[m]) for m in GENERATION_METRICS)
        + f" over {rounds} interleaved rounds with the last good folder, paired test"
    )
    if verdict in ("regressed", "improved"):
        details = {m: metrics[m].to_dict() for m in GENERATION_METRICS}
        return verdict, Finding("latency", what, verdict == "regressed", details), ""
    return verdict or "inconclusive", None, what
