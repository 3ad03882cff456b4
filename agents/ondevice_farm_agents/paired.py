"""A paired job: the candidate's own run, then rounds of A and B interleaved on the same unit.

Each round measures the baseline (A) and the candidate (B) in a fresh session each
(`DeviceAgent.measure_session`: its own first inference, warm-up and timed runs), in an order
drawn at random per round from the plan's seed and recorded. Drift that both sessions of a round
share (a night's level, DVFS, thermal state) then cancels in their ratio; randomising the order
keeps a systematic first/second effect (a warmer page cache, a clock still ramping) out of it
(Abedi & Brecht, ICPE 2017). After every round the plan's `decided` sees the rounds' p50 pairs;
the rounds stop when it says so, at `max_rounds`, or when the next round would overrun
`budget_s` of unit time.

A generation job (`RunRequest.generation`) is compared the same way on two metrics: each side's
session is the agent's own `run` (a fresh session: on the host a fresh process with its own load
and warm-up generation), whose timed generations give that side's TTFT and decode tokens/s for the
round (farm/ondevice_farm/analysis/paired_generation.py). A fresh session per round, not one kept
per side, because a session's state (thread placement, allocator layout) moves its figures by a few
percent for its whole life: kept for every round it would not cancel, and an A/A compare of one
folder would call the two sides different. The plan's `decided` is asked of each metric's rounds,
as time-like (A, B) pairs (TTFT, and time per decode token); the rounds stop when both are decided.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from ondevice_farm.analysis.latency import session_p50
from ondevice_farm.analysis.paired_generation import (
    DECODE_RATE,
    TTFT,
    GenerationRound,
    SessionFigures,
    round_figures,
    session_figures,
    slowness_pairs,
)
from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.base import (
    DeviceAgent,
    DeviceRun,
    DeviceUnit,
    PairedPlan,
    PairedRound,
    PairedTrace,
    RunRequest,
)

#: how a generation round's metrics are named in progress lines, each ratio above 1 meaning B slower
GENERATION_PROGRESS_NAMES = {TTFT: "TTFT B/A", DECODE_RATE: "decode t/s A/B"}


class RoundListener(Protocol):
    """Told after every round: the (A p50, B p50) of the rounds so far, in ms; for a generation job
    `metrics` holds each metric's time-like (A, B) pairs by its progress name, and `pairs` TTFT's."""

    def __call__(
        self,
        pairs: Sequence[tuple[float, float]],
        metrics: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    ) -> None: ...


def generation_session(agent: DeviceAgent, unit: DeviceUnit, request: RunRequest) -> SessionFigures:
    """One side's session of a generation round: the agent's own run of it (a fresh session)."""
    run = agent.run(unit, request)
    if run.generation is None:
        raise DeviceError(f"{unit.name}: the agent ran a generation job without a generation trace")
    return session_figures(run.generation)


def run_paired_rounds(
    agent: DeviceAgent,
    unit: DeviceUnit,
    candidate: RunRequest,
    plan: PairedPlan,
    on_round: RoundListener | None = None,
) -> PairedTrace:
    if plan.max_rounds < 1:
        raise ValueError("a paired job needs at least one round")
    rng = random.Random(plan.seed)
    baseline = replace(plan.baseline, paired=None, profile_ops=False, repeats=1)
    candidate = replace(candidate, paired=None, profile_ops=False, repeats=1)
    began = time.monotonic()
    rounds: list[PairedRound] = []
    #: (A p50, B p50) per round, what `decided` judges (a fixed graph; a generation job: its p50s
    #: per decode token, kept for the job document, while `decided` judges its two metrics)
    pairs: list[tuple[float, float]] = []
    generation_rounds: list[GenerationRound] = []
    stopped = "max-rounds"
    while len(rounds) < plan.max_rounds:
        elapsed = time.monotonic() - began
        if rounds and elapsed + elapsed / len(rounds) > plan.budget_s:
            stopped = "budget"
            break
        order = "AB" if rng.random() < 0.5 else "BA"
        started_at = time.time()
        if candidate.generation is not None:
            round_ = _generation_round(agent, unit, order, baseline, candidate, started_at)
            rounds.append(round_)
            generation_rounds.append(round_)
            pairs.append((session_p50(round_.baseline_samples_ms), session_p50(round_.candidate_samples_ms)))
            metrics = slowness_pairs([round_figures(r) for r in generation_rounds])
            if on_round is not None:
                on_round(metrics[TTFT], {GENERATION_PROGRESS_NAMES[m]: p for m, p in metrics.items()})
            # the rounds go on until TTFT and the time per decode token are both decided
            judged = list(metrics.values())
        else:
            samples: dict[str, list[float]] = {}
            for which in order:
                agent.cancellation.check(unit.serial)
                samples[which] = list(agent.measure_session(unit, baseline if which == "A" else candidate))
            rounds.append(PairedRound(order, samples["A"], samples["B"], started_at, time.time()))
            pairs.append((session_p50(samples["A"]), session_p50(samples["B"])))
            if on_round is not None:
                on_round(pairs)
            judged = [pairs]
        if (
            plan.decided is not None
            and len(rounds) >= plan.min_rounds
            and all(plan.decided(p) for p in judged)
        ):
            stopped = "decided"
            break
    return PairedTrace(
        rounds=rounds,
        seed=plan.seed,
        stopped=stopped,
        elapsed_s=time.monotonic() - began,
        controls=agent.session_controls(unit, candidate),
    )


def _generation_round(
    agent: DeviceAgent,
    unit: DeviceUnit,
    order: str,
    baseline: RunRequest,
    candidate: RunRequest,
    started_at: float,
) -> GenerationRound:
    figures: dict[str, SessionFigures] = {}
    for which in order:
        agent.cancellation.check(unit.serial)
        figures[which] = generation_session(agent, unit, baseline if which == "A" else candidate)
    a, b = figures["A"], figures["B"]
    return GenerationRound(
        order=order,
        baseline_samples_ms=a.token_ms,
        candidate_samples_ms=b.token_ms,
        started_at=started_at,
        finished_at=time.time(),
        baseline_ttft_ms=a.ttft_ms,
        candidate_ttft_ms=b.ttft_ms,
        baseline_decode_tokens_per_s=a.decode_tokens_per_s,
        candidate_decode_tokens_per_s=b.decode_tokens_per_s,
    )


def attach_paired(
    agent: DeviceAgent,
    unit: DeviceUnit,
    run: DeviceRun,
    request: RunRequest,
    on_round: RoundListener | None = None,
) -> DeviceRun:
    """The candidate's run with its paired rounds, where the request asks for them."""
    if request.paired is not None:
        agent.prepare(unit, request.paired.baseline)
        run.paired = run_paired_rounds(agent, unit, request, request.paired, on_round)
    return run
