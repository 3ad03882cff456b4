"""Split ONNX Runtime's profile into its runs: the cold first run is left out of the per-op table,
and each kernel's median and mean are over the warm runs (`ondevice_farm.analysis.op_table`).

A profiled session times every `run()` from the first, and the first run of a fresh session pays
one-off costs inside its kernels: on the CUDA provider cuDNN's exhaustive convolution algorithm
search, kernel loading and arena growth. Recorded on an NVIDIA H200 (tests/cuda/fixtures), the
first of ten runs of mobilenet_v2 spent 735 ms in its nodes and each later run about 1.7 ms, so a
mean over all ten runs is the first run divided by ten. The per-op table is the warm runs.

Each run is one `model_run` event (category `Session`); a node event belongs to the run whose
interval holds its start.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ondevice_farm.analysis.ort_profile import node_events, op_timings, op_timings_by_run
from ondevice_farm.measurement import DeviceRun

RUN_EVENT = "model_run"
#: runs left out of the per-op table: the first, which warms the session up
DEFAULT_COLD_RUNS = 1
#: warm profiled runs at most; they are separate from the timed ones: profiling costs time per node
DEFAULT_PROFILED_RUNS = 10


@dataclass(frozen=True)
class ProfiledRun:
    start_us: float
    dur_us: float
    #: the run's node (kernel) events, in the order the profile lists them
    nodes: tuple[Mapping[str, Any], ...]

    @property
    def node_us(self) -> float:
        return sum(float(e.get("dur", 0.0)) for e in self.nodes)

    def holds(self, event: Mapping[str, Any]) -> bool:
        ts = float(event.get("ts", -1.0))
        return self.start_us <= ts <= self.start_us + self.dur_us


def profiled_runs(events: Iterable[Mapping[str, Any]]) -> list[ProfiledRun]:
    """The runs in time order, each with its node events (an empty list: no `model_run` events)."""
    events = list(events)
    windows = sorted(
        (float(e.get("ts", 0.0)), float(e.get("dur", 0.0)))
        for e in events
        if e.get("cat") == "Session" and e.get("name") == RUN_EVENT
    )
    runs = [ProfiledRun(start, dur, ()) for start, dur in windows]
    members: list[list[Mapping[str, Any]]] = [[] for _ in runs]
    starts = [start for start, _ in windows]
    # a profile's runs follow one another: the run that holds an event is the last to start before
    # it, found by bisection (a scan of every run per event was 13,000 tests for a 200-op profile)
    disjoint = all(a[0] + a[1] < b[0] for a, b in pairwise(windows))
    for event in node_events(events):
        if disjoint:
            k = bisect_right(starts, float(event.get("ts", -1.0))) - 1
            if k >= 0 and runs[k].holds(event):
                members[k].append(event)
            continue
        for k, run in enumerate(runs):
            if run.holds(event):
                members[k].append(event)
                break
    return [ProfiledRun(r.start_us, r.dur_us, tuple(m)) for r, m in zip(runs, members, strict=True)]


def profiled_run_count(timed_runs: int) -> int:
    """How many runs a profiled session makes: the cold ones, then as many warm ones as were timed,
    between one and `DEFAULT_PROFILED_RUNS`."""
    return max(1, min(timed_runs, DEFAULT_PROFILED_RUNS)) + DEFAULT_COLD_RUNS


def warm_events(
    events: Sequence[Mapping[str, Any]],
    cold_runs: int = DEFAULT_COLD_RUNS,
    runs: Sequence[ProfiledRun] | None = None,
) -> list[Mapping[str, Any]]:
    """`events` without the node events of the first `cold_runs` runs (`runs`: `profiled_runs(events)`,
    where the caller has it already).

    Left as they are where that would leave no node event (a profile of one run, or one with no
    `model_run` events): a cold figure is better than none.
    """
    runs = profiled_runs(events) if runs is None else runs
    cold = {id(e) for run in runs[:cold_runs] for e in run.nodes}
    if not cold or not any(run.nodes for run in runs[cold_runs:]):
        return list(events)
    return [e for e in events if id(e) not in cold]


def record_profile(run: DeviceRun, events: Sequence[Mapping[str, Any]]) -> list[ProfiledRun]:
    """Fill `run`'s per-op table (warm runs only: each kernel's median and mean time per run),
    placement and trace from a profile; the runs found. A profile without marked warm runs gives
    each kernel event as one run (`op_timings`)."""
    runs = profiled_runs(events)
    warm = [r.nodes for r in runs[DEFAULT_COLD_RUNS:] if r.nodes]
    run.ops = op_timings_by_run(warm) if warm else op_timings(warm_events(events, runs=runs))
    run.placement = {op.name: op.provider for op in run.ops}
    kept = [e for r in trace_runs(runs) for e in r.nodes]
    run.trace_events = [dict(e) for e in (kept or node_events(events))]
    return runs


def trace_runs(runs: Sequence[ProfiledRun], cold_runs: int = DEFAULT_COLD_RUNS) -> list[ProfiledRun]:
    """The runs a job's stored trace keeps: the cold ones and one warm run, the one whose node time
    is the (lower) median of the warm runs'.

    The per-op table already summarises every warm run; what a timeline adds is how one inference
    lays out, cold and typical. Keeping every profiled run made the trace 87% of a job's document
    and, at 200 ops, 2,200 events a job for the controller to receive, slim and encode: the cost
    that bounded a lab's job rate (docs/benchmarks.md, "A night of a real lab").
    """
    warm = sorted((r for r in runs[cold_runs:] if r.nodes), key=lambda r: r.node_us)
    median = [warm[(len(warm) - 1) // 2]] if warm else []
    return [r for r in runs[:cold_runs] if r.nodes] + median
