"""A paired job: the candidate's own run, then rounds of A and B interleaved on the same unit.

Each round measures the baseline (A) and the candidate (B) in a fresh session each
(`DeviceAgent.measure_session`: its own first inference, warm-up and timed runs), in an order
drawn at random per round from the plan's seed and recorded. Drift that both sessions of a round
share (a night's level, DVFS, thermal state) then cancels in their ratio; randomising the order
keeps a systematic first/second effect (a warmer page cache, a clock still ramping) out of it
(Abedi & Brecht, ICPE 2017). After every round the plan's `decided` sees the rounds' p50 pairs;
the rounds stop when it says so, at `max_rounds`, or when the next round would overrun
`budget_s` of unit time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ondevice_farm.analysis.latency import session_p50
from ondevice_farm_agents.base import (
    DeviceAgent,
    DeviceRun,
    DeviceUnit,
    PairedPlan,
    PairedRound,
    PairedTrace,
    RunRequest,
)

#: told after every round: the (A p50, B p50) of the rounds so far, in ms
RoundListener = Callable[[Sequence[tuple[float, float]]], None]


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
    #: (A p50, B p50) per round, what `decided` judges
    pairs: list[tuple[float, float]] = []
    stopped = "max-rounds"
    while len(rounds) < plan.max_rounds:
        elapsed = time.monotonic() - began
        if rounds and elapsed + elapsed / len(rounds) > plan.budget_s:
            stopped = "budget"
            break
        order = "AB" if rng.random() < 0.5 else "BA"
        started_at = time.time()
        samples: dict[str, list[float]] = {}
        for which in order:
            agent.cancellation.check(unit.serial)
            samples[which] = list(agent.measure_session(unit, baseline if which == "A" else candidate))
        rounds.append(PairedRound(order, samples["A"], samples["B"], started_at, time.time()))
        pairs.append((session_p50(samples["A"]), session_p50(samples["B"])))
        if on_round is not None:
            on_round(pairs)
        if plan.decided is not None and len(rounds) >= plan.min_rounds and plan.decided(pairs):
            stopped = "decided"
            break
    return PairedTrace(
        rounds=rounds,
        seed=plan.seed,
        stopped=stopped,
        elapsed_s=time.monotonic() - began,
        controls=agent.session_controls(unit, candidate),
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
