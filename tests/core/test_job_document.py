from __future__ import annotations

import math

import pytest

from ondevice_farm.analysis.job import latency_document
from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.base import DeviceRun


def test_percentile_only_runners_keep_their_percentiles() -> None:
    """onnxruntime_perf_test prints percentiles, not samples: report them, and no made-up spread."""
    run = DeviceRun(
        load_ms=10.0,
        first_inference_ms=math.nan,
        samples_ms=[],
        outputs={},
        latency_summary_ms={"p50": 4.0, "p90": 4.5, "p99": 6.0, "mean": 4.2, "min": 3.9},
    )
    latency = latency_document(run)
    assert (latency["p50"], latency["p99"], latency["mean"]) == (4.0, 6.0, 4.2)
    assert latency["std"] is None and latency["cv"] is None and latency["samples"] == []
    assert latency["max"] is None


def test_no_latency_at_all_is_a_device_error() -> None:
    run = DeviceRun(load_ms=1.0, first_inference_ms=1.0, samples_ms=[], outputs={})
    with pytest.raises(DeviceError):
        latency_document(run)


def test_a_percentile_only_runner_names_its_percentile_method() -> None:
    run = DeviceRun(
        load_ms=10.0,
        first_inference_ms=1.0,
        samples_ms=[],
        outputs={},
        latency_summary_ms={"p50": 4.0, "p90": 4.5, "p99": 6.0},
        percentile_method="onnxruntime_perf_test's own percentiles of its timed runs",
    )
    assert latency_document(run)["percentile_method"].startswith("onnxruntime_perf_test")


def test_samples_from_every_session_make_the_latency() -> None:
    run = DeviceRun(
        load_ms=1.0,
        first_inference_ms=1.0,
        samples_ms=[1.0, 1.1, 1.2],
        outputs={},
        repeat_samples_ms=[[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]],
    )
    latency = latency_document(run)
    assert latency["percentile_method"] == "linear" and len(latency["repeats"]) == 2
    assert latency["p50"] == pytest.approx(math.sqrt(1.1 * 2.1)) and len(latency["samples"]) == 6
