"""A sustained run on the host: inferences back to back for a duration, cut into windows.

Each window keeps its inferences' latencies (monotonic clock) and the telemetry read at its end,
so the report can show what the first minute hides: throttling, frequency drops, heat.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ondevice_farm_agents.base import SustainedTrace, SustainedWindow, TelemetrySample

NS_PER_S = 1e9
NS_PER_MS = 1e6


def run_sustained(
    infer: Callable[[], object],
    duration_s: float,
    window_s: float,
    telemetry: Callable[[], TelemetrySample],
    *,
    unavailable: list[str] | None = None,
) -> SustainedTrace:
    start_sample = telemetry()
    windows: list[SustainedWindow] = []
    begin = time.perf_counter_ns()
    end = begin + int(duration_s * NS_PER_S)
    window_end = begin + int(window_s * NS_PER_S)
    window_start, samples = begin, []
    while True:
        before = time.perf_counter_ns()
        if before >= end:
            break
        infer()
        after = time.perf_counter_ns()
        samples.append((after - before) / NS_PER_MS)
        if after >= window_end or after >= end:
            windows.append(
                SustainedWindow(
                    (window_start - begin) / NS_PER_S, (after - begin) / NS_PER_S, samples, telemetry()
                )
            )
            window_start, samples = after, []
            window_end = after + int(window_s * NS_PER_S)
    return SustainedTrace(duration_s, window_s, windows, start_sample, list(unavailable or []))
