"""Per-op statistics: each kernel's median time per profiled run (with its mean and the number of
runs), shares of the summed medians, in the job document, the terminal and the HTML (not in
/metrics: docs/metrics.md, "Series budget").

The profiles are ONNX Runtime's trace format, written here with round figures so that what a
slow run does to each statistic is exact: one cold run, then five warm ones in which the Conv
takes 100 us and the Relu 10 us, except in one slow run where the Conv takes 5,000 us (a
preempted thread on a loaded host).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from ondevice_farm.analysis.op_table import op_table
from ondevice_farm.analysis.profile_runs import profiled_runs, record_profile
from ondevice_farm.measurement import DeviceRun
from ondevice_farm.reports.html import render_html
from ondevice_farm.reports.terminal import ops_table
from tests.report.crafted import job, run

CPU = "CPUExecutionProvider"
STEADY_CONV_US = 100.0
SLOW_CONV_US = 5000.0
RELU_US = 10.0
COLD_CONV_US = 900.0


def _profile(conv_us: list[float]) -> list[dict[str, Any]]:
    """A cold run, then one warm run per entry of `conv_us`: `model_run` windows around kernel events."""
    events: list[dict[str, Any]] = []
    ts = 0.0
    for conv in [COLD_CONV_US, *conv_us]:
        start, t = ts, ts + 1.0
        for name, op_type, dur in (("conv", "Conv", conv), ("relu", "Relu", RELU_US)):
            args = {"op_name": op_type, "provider": CPU}
            events.append(
                {"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "ts": t, "dur": dur, "args": args}
            )
            t += dur + 1.0
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "ts": start, "dur": t - start})
        ts = t + 10.0
    return events


def _rows(conv_us: list[float]) -> dict[str, dict[str, Any]]:
    device_run = DeviceRun(load_ms=1.0, first_inference_ms=1.0, samples_ms=[1.0], outputs={})
    record_profile(device_run, _profile(conv_us))
    return {row["name"]: row for row in op_table(device_run.ops)}


STEADY = [STEADY_CONV_US] * 5
ONE_SLOW = [STEADY_CONV_US, STEADY_CONV_US, SLOW_CONV_US, STEADY_CONV_US, STEADY_CONV_US]


def test_one_slow_profiled_run_leaves_the_median_and_the_shares_unmoved() -> None:
    steady, slow = _rows(STEADY), _rows(ONE_SLOW)
    assert slow["conv"]["median_us"] == steady["conv"]["median_us"] == STEADY_CONV_US
    assert slow["conv"]["runs"] == 5  # the cold run left out
    assert slow["conv"]["share_of"] == "median_us"
    # the shares are of the summed medians: the slow run moves neither
    assert slow["conv"]["share"] == steady["conv"]["share"] == pytest.approx(100 / 110, abs=1e-6)
    # the mean, kept beside it, does move: by a fifth of the slow run's excess
    assert slow["conv"]["mean_us"] == pytest.approx(STEADY_CONV_US + (SLOW_CONV_US - STEADY_CONV_US) / 5)
    assert slow["conv"]["mean_us"] / (slow["conv"]["mean_us"] + RELU_US) > 0.99  # what a mean share said


def _job(conv_us: list[float]) -> dict[str, Any]:
    document = job("host-cpu", "ort/cpu")
    document["ops"] = list(_rows(conv_us).values())
    return document


def test_the_terminal_ranks_by_the_median_and_shows_the_mean_beside_it() -> None:
    out = io.StringIO()
    Console(file=out, width=160).print(ops_table(_job(ONE_SLOW)))
    text = out.getvalue()
    assert "median us" in text and "mean us" in text
    assert "100.0" in text and "1080.0" in text and "90.9%" in text
    assert "over 5 profiled runs" in text


def test_the_html_table_shows_median_mean_and_runs() -> None:
    html = render_html(run(_job(ONE_SLOW)))
    assert "median ms" in html and "mean ms" in html and "share of medians" in html
    assert "1.080" in html and "90.9%" in html


def test_the_trace_keeps_the_cold_run_and_the_median_warm_run() -> None:
    device_run = DeviceRun(load_ms=1.0, first_inference_ms=1.0, samples_ms=[1.0], outputs={})
    # warm Conv times out of order: the median one (300 us) is the fourth warm run
    record_profile(device_run, _profile([500.0, 100.0, 5000.0, 300.0, 200.0]))
    convs = [e["dur"] for e in device_run.trace_events if e["name"] == "conv_kernel_time"]
    assert convs == [COLD_CONV_US, 300.0]  # in time order, two of six runs
    assert len(device_run.trace_events) == 4
    # the per-op table still summarises every warm run
    assert {op.name: op.runs for op in device_run.ops}["conv"] == 5


def test_a_kernel_event_belongs_to_the_first_run_that_holds_it_when_runs_overlap() -> None:
    # two Run() calls from two threads overlap; the bisection serves runs that follow one another
    def node(ts: float) -> dict[str, Any]:
        return {"cat": "Node", "name": "conv_kernel_time", "ph": "X", "ts": ts, "dur": 1.0, "args": {}}

    def window(ts: float) -> dict[str, Any]:
        return {"cat": "Session", "name": "model_run", "ph": "X", "ts": ts, "dur": 100.0}

    overlapping = profiled_runs([window(0.0), window(50.0), node(60.0), node(120.0)])
    assert [[e["ts"] for e in r.nodes] for r in overlapping] == [[60.0], [120.0]]
    # runs that follow one another; an event between them belongs to none
    disjoint = profiled_runs([window(0.0), window(200.0), node(60.0), node(150.0), node(260.0)])
    assert [[e["ts"] for e in r.nodes] for r in disjoint] == [[60.0], [260.0]]
