"""Read ONNX Runtime's profile (Chrome trace events) into per-node timings.

The same format comes from the Python API (`enable_profiling`), from `onnxruntime_perf_test -p`
on a phone, and from the CUDA provider, so every ONNX Runtime runner shares this parser.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ondevice_farm.measurement import OpTiming

KERNEL_SUFFIX = "_kernel_time"


def node_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The per-kernel events (category `Node`, name `<node>_kernel_time`)."""
    return [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)]


def op_timings(events: Iterable[Mapping[str, Any]]) -> list[OpTiming]:
    """One `OpTiming` per node, the mean over every profiled run, in first-seen order."""
    durations: dict[str, list[float]] = defaultdict(list)
    meta: dict[str, tuple[str, str]] = {}
    for event in node_events(events):
        name = str(event["name"])[: -len(KERNEL_SUFFIX)]
        args = event.get("args") or {}
        durations[name].append(float(event.get("dur", 0.0)))
        meta.setdefault(name, (str(args.get("op_name", "")), str(args.get("provider", ""))))
    return [
        OpTiming(
            name=name, op_type=meta[name][0], provider=meta[name][1], mean_us=sum(d) / len(d), calls=len(d)
        )
        for name, d in durations.items()
    ]


def session_events(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Session-level durations in microseconds (`model_loading_uri`, `session_initialization`)."""
    return {str(e["name"]): float(e.get("dur", 0.0)) for e in events if e.get("cat") == "Session"}
