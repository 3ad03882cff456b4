"""Is B slower than A at generating? The paired verdict of a generation job, on two metrics.

A generation compare measures A and B interleaved on one unit in rounds, as a fixed graph's compare
does (agents/ondevice_farm_agents/paired.py): each round runs one fresh session of each side, and a
session's figures come from its timed generations (the spec's `reps`), per generation
- TTFT (ms): prompt prefill + the first `generate_next_token`, load excluded (docs/generate.md);
- decode tokens/s: tokens after the first over their span (MLPerf Client v2.0's TPS);
and the session's figure of each is its best generation: the least TTFT, the highest decode rate.
Timing noise on a shared unit is additive and positive (another process's time slice lands inside a
generation and only ever lengthens it), and under it the minimum is the most stable estimator of a
session's own speed (Chen & Revels, "Robust benchmarking in noisy environments", arXiv:1608.04295, 2016, the
method of Julia's BenchmarkTools). Measured on the 2-core development host under load 5-7
(2026-12-03, tests/generate/tiny_llama.py's folder, prompt=64,decode=32,reps=7): its 1.5 ms decode
span was hit by such a slice in about 40% of generations, so a session's median flipped between
~20,000 and ~5,000 tokens/s and an A/A compare on medians was still `inconclusive` after 18 rounds
(interval 0.28-3.3x); on the best of 7, the rounds' log ratios spread by 2.5% (sd) and the same
A/A compare was `same` at +/-3% on both metrics after 20 rounds (12 s).

Each metric is judged by the same test as a fixed graph's p50 (farm/ondevice_farm/analysis/paired.py:
Student's paired t on per-round log ratios, alpha spent over the looks). Both are oriented so that a
ratio above 1 means B is slower: TTFT by log(B/A), decode rate by log(A/B), which is log(B/A) of the
time per decode token (1000 / rate), so the per-round figures the stopping rule sees are time-like
for both. The two metrics of one pair are two tests of one family: each spends alpha / 2 of the
pair's share (Bonferroni over the metrics, `GENERATION_METRICS`; it holds whatever the correlation
of TTFT and decode rate, which share the model's weights and the unit's state).

A pair's overall verdict: `slower` when either metric is slower, `same` when both are the same,
`faster` when one is faster and the other faster or the same, `inconclusive` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ondevice_farm.analysis.job import paired_document
from ondevice_farm.analysis.paired import PairedPolicy, PairedVerdict, judge
from ondevice_farm.generate.metrics import MS_PER_S, decode_rate
from ondevice_farm.generate.trace import GenerationTrace
from ondevice_farm.measurement import PairedRound, PairedTrace

TTFT = "ttft_ms"
DECODE_RATE = "decode_tokens_per_s"
#: what a generation compare judges, each a test of the family (Bonferroni over the metrics)
GENERATION_METRICS = (TTFT, DECODE_RATE)
DEFINITIONS = {
    TTFT: "time to first token: prompt prefill (append_tokens) + the first generate_next_token, load "
    "excluded; per session the least of its timed generations",
    DECODE_RATE: "decode tokens/s: (decode tokens - 1) / the span from the first token's end to the "
    "last's (MLPerf Client v2.0 TPS); per session the highest of its timed generations",
}
#: how each metric's ratio reads, oriented so that above 1 is B slower
RATIO_DEFINITIONS = {
    TTFT: "B/A of TTFT (above 1: B slower)",
    DECODE_RATE: "A/B of decode tokens/s (above 1: B slower)",
}
UNITS = {TTFT: "ms", DECODE_RATE: "tokens/s"}
GENERATION_METHOD = (
    "paired t on per-round log ratios of TTFT (B/A) and of decode tokens/s (A/B), Bonferroni "
    "alpha-spending over looks (alpha_n = alpha*n0/(n(n+1))), over the compare's pairs and over "
    "the two metrics"
)


@dataclass(frozen=True)
class GenerationRound(PairedRound):
    """A generation round: besides each session's per-token decode latencies (the `samples_ms`,
    whose p50 the job document stores as for any paired round), each session's TTFT and decode
    rate per timed generation, measured by the unit's runner."""

    baseline_ttft_ms: list[float]
    candidate_ttft_ms: list[float]
    baseline_decode_tokens_per_s: list[float]
    candidate_decode_tokens_per_s: list[float]


@dataclass(frozen=True)
class SessionFigures:
    """One generation session's figures for a round (its first depth's timed generations)."""

    ttft_ms: list[float]
    decode_tokens_per_s: list[float]
    token_ms: list[float]


def session_figures(trace: GenerationTrace) -> SessionFigures:
    """The figures a round takes from one session's trace: its first depth's timed generations."""
    if not trace.reps:
        raise ValueError("a generation session without timed generations gives no round figures")
    depth = trace.reps[0].depth
    reps = [r for r in trace.reps if r.depth == depth]
    return SessionFigures(
        ttft_ms=[r.ttft_ms for r in reps],
        decode_tokens_per_s=[decode_rate(r) for r in reps],
        token_ms=[t for r in reps for t in r.token_ms],
    )


def round_figures(round_: GenerationRound) -> dict[str, float]:
    """The round's stored figures: each side's best generation of its session, per metric (the
    least TTFT, the highest decode rate: module docstring)."""
    return {
        "baseline_ttft_ms": min(round_.baseline_ttft_ms),
        "candidate_ttft_ms": min(round_.candidate_ttft_ms),
        "baseline_decode_tokens_per_s": max(round_.baseline_decode_tokens_per_s),
        "candidate_decode_tokens_per_s": max(round_.candidate_decode_tokens_per_s),
    }


def is_generation_rounds(rounds: Sequence[Mapping[str, Any]]) -> bool:
    """Whether stored rounds are a generation job's (they carry both metrics per side)."""
    return bool(rounds) and all("baseline_ttft_ms" in r and "candidate_ttft_ms" in r for r in rounds)


def slowness_pairs(rounds: Sequence[Mapping[str, float]]) -> dict[str, list[tuple[float, float]]]:
    """Per metric, (A, B) per round as time-like figures (higher is slower): TTFT in ms, and the
    time per decode token in ms (1000 / decode tokens/s). What the stopping rule and `judge` see."""
    return {
        TTFT: [(float(r["baseline_ttft_ms"]), float(r["candidate_ttft_ms"])) for r in rounds],
        DECODE_RATE: [
            (
                MS_PER_S / float(r["baseline_decode_tokens_per_s"]),
                MS_PER_S / float(r["candidate_decode_tokens_per_s"]),
            )
            for r in rounds
        ],
    }


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class MetricVerdict:
    """One metric's paired verdict, with A's and B's figures in the metric's own unit."""

    metric: str
    paired: PairedVerdict
    #: geometric means over the rounds of A's and B's session figures (ms or tokens/s)
    baseline: float
    candidate: float

    def to_dict(self) -> dict[str, Any]:
        doc = self.paired.to_dict()
        for key in ("baseline_p50_ms", "candidate_p50_ms"):
            doc.pop(key)
        return {
            **doc,
            "metric": self.metric,
            "definition": DEFINITIONS[self.metric],
            "ratio_definition": RATIO_DEFINITIONS[self.metric],
            "unit": UNITS[self.metric],
            "baseline": self.baseline,
            "candidate": self.candidate,
            "method": GENERATION_METHOD,
        }


def overall_verdict(verdicts: Sequence[str]) -> str:
    """A pair's verdict from its metrics' (module docstring)."""
    if "slower" in verdicts:
        return "slower"
    if all(v == "same" for v in verdicts):
        return "same"
    if "faster" in verdicts and all(v in ("faster", "same") for v in verdicts):
        return "faster"
    return "inconclusive"


def judge_generation(rounds: Sequence[Mapping[str, float]], policy: PairedPolicy) -> dict[str, MetricVerdict]:
    """Each metric's verdict after the stored rounds so far; `policy.alpha` is one metric's share
    (the family's alpha already divided over pairs and metrics, `generation_family`)."""
    pairs = slowness_pairs(rounds)
    figures = {
        TTFT: (
            [float(r["baseline_ttft_ms"]) for r in rounds],
            [float(r["candidate_ttft_ms"]) for r in rounds],
        ),
        DECODE_RATE: (
            [float(r["baseline_decode_tokens_per_s"]) for r in rounds],
            [float(r["candidate_decode_tokens_per_s"]) for r in rounds],
        ),
    }
    return {
        metric: MetricVerdict(
            metric, judge(pairs[metric], policy), _geomean(figures[metric][0]), _geomean(figures[metric][1])
        )
        for metric in GENERATION_METRICS
    }


def generation_family(policy: PairedPolicy, pairs: int) -> PairedPolicy:
    """Each test's share of alpha: Bonferroni over the pairs and over the two metrics of each."""
    return policy.for_family(pairs * len(GENERATION_METRICS))


def paired_rounds_document(trace: PairedTrace) -> dict[str, Any]:
    """A paired job's rounds as stored (`analysis.job.paired_document`), each generation round with
    both sides' session medians of both metrics beside its per-token p50s."""
    document = paired_document(trace)
    for stored, round_ in zip(document["rounds"], trace.rounds, strict=True):
        if isinstance(round_, GenerationRound):
            stored.update(round_figures(round_))
    return document
