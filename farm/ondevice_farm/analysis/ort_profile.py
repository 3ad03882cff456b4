"""Read ONNX Runtime's profile (Chrome trace events) into per-node timings.

The same format comes from the Python API (`enable_profiling`), from `onnxruntime_perf_test -p`
on a phone, and from the CUDA provider, so every ONNX Runtime runner shares this parser.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ondevice_farm.measurement import OpTiming

KERNEL_SUFFIX = "_kernel_time"


def node_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The per-kernel events (category `Node`, name `<node>_kernel_time`)."""
    return [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)]


def op_timings(events: Iterable[Mapping[str, Any]]) -> list[OpTiming]:
    """One `OpTiming` per node over every kernel event, each event taken as one run (a profile
    whose runs are not marked, or one run's events), in first-seen order."""
    return op_timings_by_run([[event] for event in node_events(events)])


def op_timings_by_run(runs: Sequence[Iterable[Mapping[str, Any]]]) -> list[OpTiming]:
    """One `OpTiming` per node from profiled runs (each run's events): its time in a run is the
    sum of its kernel events there, and `median_us`, `mean_us` and `runs` are over the runs it
    ran in; in first-seen order."""
    per_run: dict[str, list[float]] = {}
    calls: Counter[str] = Counter()
    meta: dict[str, tuple[str, str]] = {}
    for run in runs:
        in_run: dict[str, float] = {}
        for event in node_events(run):
            name = str(event["name"])[: -len(KERNEL_SUFFIX)]
            args = event.get("args") or {}
            in_run[name] = in_run.get(name, 0.0) + float(event.get("dur", 0.0))
            calls[name] += 1
            meta.setdefault(name, (str(args.get("op_name", "")), str(args.get("provider", ""))))
        for name, us in in_run.items():
            per_run.setdefault(name, []).append(us)
    return [
        OpTiming(
            name=name,
            op_type=meta[name][0],
            provider=meta[name][1],
            mean_us=statistics.fmean(times),
            calls=calls[name],
            median_us=statistics.median(times),
            runs=len(times),
        )
        for name, times in per_run.items()
    ]


def session_events(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Session-level durations in microseconds (`model_loading_uri`, `session_initialization`)."""
    return {str(e["name"]): float(e.get("dur", 0.0)) for e in events if e.get("cat") == "Session"}
