"""How often does the nightly regression test cry wolf, and how small a slowdown does it catch?

    .venv/bin/python benchmarks/regression.py [--model examples/tinynet.onnx] [--runs-per-job 30]

Collects many real host-cpu runs of one model (each a fresh ONNX Runtime session, warm-up, then
the timed runs, exactly as a job does), then:
  - A/A false-positive rate: pairs of runs of the same model on the same host compared with
    `farm.analysis.regression.compare_latency` (goal < 1%), back to back and further apart in
    time (the host drifts between two nightlies), on the samples alone and with the history of
    earlier runs' medians as a run-to-run noise floor (what `farm nightly` does);
  - power: the B run's real samples scaled by a slowdown factor; the smallest factor flagged in
    at least 90% of pairs is the smallest slowdown detected with 90% power.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.base import AgentSettings, RunRequest
from agents.host.agent import HostAgent
from farm.analysis.regression import RegressionPolicy, compare_latency
from farm.inputs import resolve_shapes, seeded_inputs
from farm.model import inspect_model
from farm.targets import Target

ROOT = Path(__file__).resolve().parent.parent
#: medians of earlier nightlies kept as history (farm nightly keeps up to 10; 6 fits more pairs here)
HISTORY = 6
#: how many collected runs apart two "nightlies" are: 1 is back to back, more lets the host drift
SPACINGS = (1, 10, 40)
SLOWDOWNS = (1.02, 1.05, 1.10, 1.15, 1.20, 1.30, 1.50, 2.00)


def collect(model: Path, jobs: int, runs: int, warmup: int, threads: int) -> list[list[float]]:

    info = inspect_model(model)
    shapes = resolve_shapes(info, {})
    inputs = seeded_inputs(info, shapes, 0)
    agent = HostAgent(AgentSettings())
    (unit,) = [u for u in agent.discover() if u.profile == "host-cpu"]
    request = RunRequest(
        artifact=model,
        artifact_sha256=info.sha256,
        target=Target.parse("ort/cpu"),
        inputs=inputs,
        warmup=warmup,
        runs=runs,
        profile_ops=False,
        intra_op_threads=threads,
    )
    return [agent.run(unit, request).samples_ms for _ in range(jobs)]


Pair = tuple[list[float], list[float], list[float] | None]


def rate(pairs: list[Pair], factor: float, policy: RegressionPolicy) -> float:
    flagged = sum(
        compare_latency(a, [v * factor for v in b], policy, history).regressed for a, b, history in pairs
    )
    return flagged / len(pairs)


def pairs_at(runs: list[list[float]], medians: np.ndarray, spacing: int, history: bool) -> list[Pair]:
    """Nightlies `spacing` runs apart: (previous, this one, the HISTORY medians before this one at the
    same spacing, as `farm nightly` keeps them), for every run that has that much history."""
    out: list[Pair] = []
    for t in range(spacing * HISTORY, len(runs)):
        past = [float(medians[t - spacing * k]) for k in range(HISTORY, 0, -1)] if history else None
        out.append((runs[t - spacing], runs[t], past))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "examples" / "tinynet.onnx")
    parser.add_argument("--jobs", type=int, default=600, help="host-cpu runs to collect")
    parser.add_argument(
        "--runs-per-job", type=int, default=30, help="timed runs per job (a nightly's `runs`)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    started = time.perf_counter()
    runs = collect(args.model, args.jobs, args.runs_per_job, args.warmup, args.threads)
    medians = np.array([np.median(r) for r in runs])
    print(
        f"{args.model.name}: {args.jobs} host-cpu jobs x {args.runs_per_job} timed runs in "
        f"{time.perf_counter() - started:.0f} s; job median p50 {np.median(medians):.3f} ms, "
        f"spread of job medians (p90/p10) {np.percentile(medians, 90) / np.percentile(medians, 10):.3f}"
    )
    policy = RegressionPolicy()
    for history in (False, True):
        mode = f"with the {HISTORY} previous nightlies' medians as noise floor" if history else "samples only"
        print(f"-- {mode}")
        for spacing in SPACINGS:
            pairs = pairs_at(runs, medians, spacing, history)
            fp = rate(pairs, 1.0, policy)
            print(
                f"A/A false-positive rate, runs {spacing} apart: {fp:.2%} of {len(pairs)} pairs (goal < 1%)"
            )
        pairs = pairs_at(runs, medians, SPACINGS[-1], history)
        powers = {factor: rate(pairs, factor, policy) for factor in SLOWDOWNS}
        print(
            f"power, runs {SPACINGS[-1]} apart: "
            + ", ".join(f"{f - 1:.0%}: {p:.0%}" for f, p in powers.items())
        )
        smallest = next((f for f, p in powers.items() if p >= 0.9), None)
        found = f"none up to {SLOWDOWNS[-1] - 1:.0%}" if smallest is None else f"{smallest - 1:.0%}"
        print(f"smallest slowdown detected with 90% power: {found}")


if __name__ == "__main__":
    main()
