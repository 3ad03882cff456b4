"""A synthetic per-op profile in ONNX Runtime's own trace format, read by the same code as a real one.

The simulated unit writes what `enable_profiling` would have written for a profiled session (one
`model_run` event per run, a cold run first, then one `<node>_kernel_time` event per node and run)
and hands it to `record_profile`, as the host agent does with ONNX Runtime's file: op rows,
placement and trace come out of the analysis code a real run goes through.

The graph is a made-up one of `count` nodes, fixed per (artifact, target): the same model's jobs
have the same op rows from night to night, so per-op history and diffs behave as on a real lab.
On an accelerator target some nodes run on the CPU (ops such providers commonly leave to the
CPU, and a few others), so fallback tables and counts have something to show.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ondevice_farm.analysis.profile_runs import DEFAULT_COLD_RUNS, profiled_run_count, record_profile
from ondevice_farm.measurement import DeviceRun
from ondevice_farm.targets import Target

CPU_PROVIDER = "CPUExecutionProvider"
#: op type -> (its share of a graph's nodes, its relative cost per node, whether accelerators often
#: leave it to the CPU); a CNN/transformer mix
OP_MIX: dict[str, tuple[float, float, bool]] = {
    "Conv": (0.22, 6.0, False),
    "Relu": (0.12, 0.4, False),
    "Add": (0.10, 0.6, False),
    "MatMul": (0.08, 5.0, False),
    "Mul": (0.06, 0.5, False),
    "Gemm": (0.03, 4.0, False),
    "Transpose": (0.06, 0.8, False),
    "Reshape": (0.07, 0.1, False),
    "Concat": (0.04, 0.7, False),
    "Softmax": (0.03, 1.5, False),
    "LayerNormalization": (0.04, 1.2, False),
    "Sigmoid": (0.04, 0.5, False),
    "MaxPool": (0.03, 1.0, False),
    "GlobalAveragePool": (0.02, 0.8, False),
    "Resize": (0.03, 2.0, True),
    "TopK": (0.02, 1.5, True),
    "NonMaxSuppression": (0.01, 3.0, True),
}
#: besides the CPU-prone op types, this share of an accelerator target's nodes run on the CPU
STRAY_FALLBACK_SHARE = 0.03
#: of one inference, the share spent in kernels (the rest: the session's own overhead)
KERNEL_SHARE = 0.9
#: a cold run's kernels take this many times longer (arena growth, first-touch pages)
COLD_FACTOR = 3.0


@dataclass(frozen=True)
class SyntheticGraph:
    names: tuple[str, ...]
    op_types: tuple[str, ...]
    providers: tuple[str, ...]
    #: each node's share of the kernel time of one run
    shares: np.ndarray


def target_provider(target: Target) -> str:
    return target.ort_providers()[0] if target.runtime == "ort" else target.backend


def synthetic_graph(artifact_sha256: str, target: Target, count: int) -> SyntheticGraph:
    """The made-up graph of `count` nodes, the same for the same artifact and target."""
    seed = int.from_bytes(hashlib.sha256(f"{artifact_sha256}/{target}".encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    kinds = list(OP_MIX)
    weights = np.array([OP_MIX[k][0] for k in kinds])
    types = [kinds[i] for i in rng.choice(len(kinds), size=count, p=weights / weights.sum())]
    provider = target_provider(target)
    stray = rng.random(count) < STRAY_FALLBACK_SHARE
    providers = tuple(
        CPU_PROVIDER if target.is_accelerator and (OP_MIX[t][2] or s) else provider
        for t, s in zip(types, stray, strict=True)
    )
    costs = np.array([OP_MIX[t][1] for t in types]) * rng.lognormal(0.0, 0.5, size=count)
    names = tuple(f"/stage{i // 20}/block{i % 20}/{t}_{i}" for i, t in enumerate(types))
    return SyntheticGraph(names, tuple(types), providers, costs / costs.sum())


def profile_events(
    graph: SyntheticGraph, inference_ms: float, runs: int, jitter: float, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """ONNX Runtime's profile of `runs` runs (the first cold), as `end_profiling` writes it."""
    kernel_us = inference_ms * 1000.0 * KERNEL_SHARE
    durations = (
        graph.shares * kernel_us * rng.lognormal(0.0, max(jitter, 1e-6), size=(runs, len(graph.names)))
    )
    durations[:DEFAULT_COLD_RUNS] *= COLD_FACTOR
    events: list[dict[str, Any]] = []
    ts = 1000.0
    for run in range(runs):
        start = ts
        for index, (name, op_type, provider) in enumerate(
            zip(graph.names, graph.op_types, graph.providers, strict=True)
        ):
            dur = round(float(durations[run, index]), 3)
            events.append(
                {
                    "cat": "Node",
                    "name": f"{name}_kernel_time",
                    "ph": "X",
                    "ts": round(ts, 3),
                    "dur": dur,
                    "args": {"op_name": op_type, "provider": provider, "node_index": str(index)},
                }
            )
            ts += dur + 0.5
        run_dur = ts - start + 5.0
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "ts": start - 1.0, "dur": run_dur})
        ts = start + run_dur + 20.0
    return events


def add_profile(
    run: DeviceRun,
    graph: SyntheticGraph,
    inference_ms: float,
    timed_runs: int,
    jitter: float,
    rng: np.random.Generator,
) -> None:
    """Fill `run`'s op rows, placement and trace as a profiled session of the graph would."""
    record_profile(run, profile_events(graph, inference_ms, profiled_run_count(timed_runs), jitter, rng))
    run.ops = [dataclasses.replace(op, source="synthetic") for op in run.ops]
