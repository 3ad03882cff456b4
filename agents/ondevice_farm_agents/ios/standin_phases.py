"""The stand-in's measured phases after the first prediction, as FarmRunner runs them: warm-up,
the timed runs, and the sustained phase the job asks for, with the wall clock at their edges.

The sustained phase is the host runner's own loop (`ondevice_farm_agents.host.sustained`), so
its windows are cut the same way; what the stand-in cannot read is said, not made up: a host
process has no `ProcessInfo.thermalState`, so every window's thermal state is null.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ondevice_farm_agents.base import SustainedTrace, TelemetrySample
from ondevice_farm_agents.host.sustained import run_sustained

NO_THERMAL_STATE = "thermal state (the host stand-in runs in no iOS process: no ProcessInfo.thermalState)"
NO_SILICON = "CPU frequencies and temperatures (iOS does not expose them to apps)"


def measured_phases(infer: Callable[[], object], job: dict[str, Any]) -> dict[str, Any]:
    """`samples_ms`, `spans_unix_s`, `active_inferences` and (when asked for) `sustained` of a result
    file."""
    for _ in range(job["warmup"]):
        infer()
    samples = []
    timed_start = time.time()
    for _ in range(job["runs"]):
        start = time.perf_counter()
        infer()
        samples.append((time.perf_counter() - start) * 1000.0)
    timed_end = time.time()
    # a loaded window long enough to sample a battery over, as the app runs one
    active_inferences = job["runs"]
    while time.time() - timed_start < job["min_active_s"]:
        infer()
        active_inferences += 1
    spans: dict[str, list[float]] = {"timed": [timed_start, timed_end], "active": [timed_start, time.time()]}
    phases: dict[str, Any] = {
        "samples_ms": samples,
        "spans_unix_s": spans,
        "active_inferences": active_inferences,
    }
    duration_s = float(job["sustained"]["duration_s"])
    if duration_s > 0:
        sustained_start = time.time()
        trace = run_sustained(
            infer,
            duration_s,
            float(job["sustained"]["window_s"]),
            TelemetrySample,
            unavailable=[NO_THERMAL_STATE, NO_SILICON],
        )
        spans["sustained"] = [sustained_start, time.time()]
        phases["sustained"] = _sustained_object(trace)
    return phases


def _sustained_object(trace: SustainedTrace) -> dict[str, Any]:
    return {
        "duration_s": trace.duration_s,
        "window_s": trace.window_s,
        "start": {"thermal_state": None},
        "windows": [
            {
                "start_s": w.start_s,
                "end_s": w.end_s,
                "samples_ms": w.samples_ms,
                "telemetry": {"thermal_state": None},
            }
            for w in trace.windows
        ],
        "unavailable": trace.unavailable,
    }
