"""How often does the nightly regression test cry wolf, and how small a slowdown does it catch?

    .venv/bin/python benchmarks/regression.py [--model examples/tinynet.onnx] [--runs-per-job 30]

Collects many real host-cpu runs of one model (each a fresh ONNX Runtime session, warm-up, then
the timed runs, exactly as a job does), then:
  - A/A false-positive rate: pairs of runs of the same model on the same host compared with
    `farm.analysis.regression.compare_latency` (goal < 1%), for adjacent runs and for runs far
    apart in time (drift of the host between two nightlies);
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
SLOWDOWNS = (1.02, 1.04, 1.05, 1.06, 1.08, 1.10, 1.12, 1.15, 1.20, 1.30)


def collect(model: Path, jobs: int, runs: int, warmup: int, threads: int) -> list[list[float]]:
    import onnx

    info = inspect_model(model)
    shapes = resolve_shapes(info, {})
    inputs = seeded_inputs(info, shapes, 0, onnx.load(str(model), load_external_data=False))
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


def rate(pairs: list[tuple[list[float], list[float]]], factor: float, policy: RegressionPolicy) -> float:
    flagged = sum(compare_latency(a, [v * factor for v in b], policy).regressed for a, b in pairs)
    return flagged / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "examples" / "tinynet.onnx")
    parser.add_argument("--jobs", type=int, default=300, help="host-cpu runs to collect")
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
    rng = np.random.default_rng(0)
    adjacent = [(runs[i], runs[i + 1]) for i in range(0, len(runs) - 1, 2)]
    order = rng.permutation(len(runs))
    far = [
        (runs[order[i]], runs[order[i + 1]])
        for i in range(0, len(runs) - 1, 2)
        if abs(int(order[i]) - int(order[i + 1])) > len(runs) // 4
    ]
    print(
        f"policy: alpha {policy.alpha}, min effect {policy.min_effect:.0%}, "
        f"{policy.confidence:.0%} bootstrap CI of the median ratio"
    )
    for label, pairs in (("adjacent runs", adjacent), ("runs far apart", far)):
        fp = rate(pairs, 1.0, policy)
        print(f"A/A false-positive rate, {label}: {fp:.2%} of {len(pairs)} pairs (goal < 1%)")
    print(f"{'slowdown':>9} {'power':>7}")
    smallest = None
    for factor in SLOWDOWNS:
        power = rate(adjacent, factor, policy)
        print(f"{factor:>9.2f} {power:>7.1%}")
        if smallest is None and power >= 0.9:
            smallest = factor
    found = f"none up to {SLOWDOWNS[-1]:.2f}x" if smallest is None else f"{smallest - 1:.0%}"
    print(f"smallest slowdown detected with 90% power: {found}")


if __name__ == "__main__":
    main()
