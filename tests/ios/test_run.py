"""run: a whole job through the agent, and each way a phone or the app can let it down."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ondevice_farm.errors import DeviceError, DeviceLostError, DeviceTimeoutError
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID
from ondevice_farm_agents.ios.fakes import AppFiles, FakePhone

from .conftest import MakeAgent, MakePhone, MakeRequest, expected_output

Rewrite = Callable[[dict[str, Any]], None]


class ResultFiles(AppFiles):
    """An app container that keeps a copy of each result file the app writes (the host deletes
    the job's directory once it has read it) and, where `rewrite` is given, changes the result
    before the host can read it: a runner that reports figures this test chose."""

    def __init__(self, rewrite: Rewrite | None = None) -> None:
        super().__init__()
        self.results: list[dict[str, Any]] = []
        self._rewrite = rewrite

    def rename(self, source: str, target: str) -> None:
        if target.endswith(".json") and source.endswith(".tmp"):
            document = json.loads(self.read(source))
            if self._rewrite is not None:
                self._rewrite(document)
                self.write(source, json.dumps(document).encode())
            self.results.append(document)
        super().rename(source, target)


def keep_results(phone: FakePhone, rewrite: Rewrite | None = None) -> ResultFiles:
    files = ResultFiles(rewrite)
    phone.apps[DEFAULT_BUNDLE_ID].files = files
    return files


def test_a_job_brings_back_measured_latencies_outputs_and_placement(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    written = keep_results(phone)
    agent = make_agent(phone)
    (unit,) = agent.discover()
    request = make_request(runs=9)
    agent.prepare(unit, request)

    run = agent.run(unit, request)

    np.testing.assert_allclose(run.outputs["y"], expected_output(request.inputs["x"]), rtol=1e-6)
    assert run.outputs["y"].dtype == np.float32
    assert len(run.samples_ms) == 9 and all(s > 0 for s in run.samples_ms)
    assert run.first_inference_ms > 0 and run.load_ms > 0
    # The runtime fuses before it places, as CoreML does: MatMul + Add ran as one op.
    assert run.placement == {"matmul/MatMulAddFusion": "CPU", "softmax": "CPU"}
    assert sorted(op.op_type for op in run.ops) == ["Gemm", "Softmax"]
    # each op's time is the cost share the app reported for that op times the median of its samples
    (result,) = written.results
    assert run.samples_ms == result["samples_ms"]
    costs = {op["name"]: op["estimated_cost"] for op in result["compute_plan"]["ops"]}
    median_us = float(np.median(result["samples_ms"])) * 1000.0
    assert {op.name: op.mean_us for op in run.ops} == pytest.approx(
        {n: c * median_us for n, c in costs.items()}
    )
    assert run.thermal_before is not None and run.thermal_before.status == "nominal"
    assert "stand-in" in run.runner
    # the stand-in runs an .onnx model with ONNX Runtime: no compile step, so no compile time
    assert "compile" not in result["timings_ms"]
    assert run.load_ms == result["timings_ms"]["load"]
    assert any("the runner timed no compile step" in note for note in run.notes)


def test_op_times_are_the_plans_cost_shares_of_the_median_latency(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    """A plan whose costs do not add up to 1 (MLComputePlan leaves cost on ops it does not list)
    and samples whose mean is not their median: each op's time is its own share of the median."""

    def scripted(document: dict[str, Any]) -> None:
        document["samples_ms"] = [1.0, 2.0, 10.0]
        ops = document["compute_plan"]["ops"]
        for op, cost in zip(sorted(ops, key=lambda o: o["name"]), (0.6, 0.3), strict=True):
            op["estimated_cost"] = cost
        document["timings_ms"]["compile"] = 40.0

    phone = make_phone()
    keep_results(phone, scripted)
    agent = make_agent(phone)
    (unit,) = agent.discover()

    run = agent.run(unit, make_request(runs=3))

    assert run.samples_ms == [1.0, 2.0, 10.0]
    assert {op.name: op.mean_us for op in run.ops} == pytest.approx(
        {"matmul/MatMulAddFusion": 0.6 * 2000.0, "softmax": 0.3 * 2000.0}
    )
    assert all(op.source == "estimated" for op in run.ops)
    # a compile the runner timed is part of the load, and the notes say how it adds up
    assert any(note.startswith("load = compile 40.0 ms + load") for note in run.notes)


def test_the_job_leaves_nothing_behind_in_the_container(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()

    agent.run(unit, make_request())

    assert phone.apps[DEFAULT_BUNDLE_ID].files.listdir("Documents/farm/jobs") == []
    assert phone.pid_of(DEFAULT_BUNDLE_ID) == 0  # the app was ended after its result was pulled


def test_the_app_waits_for_a_nominal_thermal_state(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    phone.thermal_readings = ["serious", "fair", "nominal"]
    agent = make_agent(phone)
    (unit,) = agent.discover()

    run = agent.run(unit, make_request())

    assert run.thermal_before is not None and run.thermal_before.status == "nominal"
    assert any(note.startswith("thermal wait") for note in run.notes)


def test_a_phone_that_stays_hot_fails_the_job_at_the_thermal_deadline(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    phone.thermal_readings = ["serious"]
    agent = make_agent(phone, extra={"ios_thermal_deadline_s": "0.2"})
    (unit,) = agent.discover()

    with pytest.raises(DeviceTimeoutError, match="did not cool down"):
        agent.run(unit, make_request())


def test_an_app_that_never_writes_its_result_times_out_and_is_ended(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone(behaviour="silent")
    agent = make_agent(phone, extra={"ios_thermal_deadline_s": "0"})
    (unit,) = agent.discover()

    started = time.monotonic()
    with pytest.raises(DeviceTimeoutError, match=r"no result within 0\.5 s"):
        agent.run(unit, make_request(timeout_s=0.5))

    assert time.monotonic() - started < 5.0
    assert phone.pid_of(DEFAULT_BUNDLE_ID) == 0


def test_a_malformed_result_file_is_a_clear_error(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    agent = make_agent(make_phone(behaviour="malformed"))
    (unit,) = agent.discover()

    with pytest.raises(DeviceError, match=r"breaks the runner contract: timings_ms.*") as caught:
        agent.run(unit, make_request())
    assert "rebuild FarmRunner" in caught.value.hint
    assert not caught.value.retryable


def test_an_app_that_dies_without_a_result_is_reported_at_once(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    agent = make_agent(make_phone(behaviour="crash"))
    (unit,) = agent.discover()

    started = time.monotonic()
    with pytest.raises(DeviceError, match="exited without writing a result"):
        agent.run(unit, make_request(timeout_s=30.0))
    assert time.monotonic() - started < 5.0


def test_a_phone_unplugged_mid_push_caches_nothing_and_the_job_runs_elsewhere(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    first, second = make_phone(udid="00008120-0000000000000001"), make_phone(udid="00008120-0000000000000002")
    first.unplug_when("set_file_contents", path_contains="Documents/farm/models/")
    agent = make_agent(first, second)
    unit_a, unit_b = agent.discover()
    request = make_request()

    with pytest.raises(DeviceLostError) as caught:
        agent.prepare(unit_a, request)
    assert caught.value.retryable

    first.plugged = True  # plugged back in: the half push must not count as cached
    model_dir = f"Documents/farm/models/{request.artifact_sha256}"
    assert not first.apps[DEFAULT_BUNDLE_ID].files.exists(model_dir)
    agent.prepare(unit_a, request)
    assert first.apps[DEFAULT_BUNDLE_ID].files.read(f"{model_dir}/tiny.onnx") == request.artifact.read_bytes()

    agent.prepare(unit_b, request)
    run = agent.run(unit_b, request)
    np.testing.assert_allclose(run.outputs["y"], expected_output(request.inputs["x"]), rtol=1e-6)


def test_a_phone_unplugged_mid_run_is_a_lost_device_and_the_retry_elsewhere_succeeds(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    first, second = make_phone(udid="00008120-0000000000000001"), make_phone(udid="00008120-0000000000000002")
    first.unplug_when("exists", path_contains="result.json")
    agent = make_agent(first, second)
    unit_a, unit_b = agent.discover()
    request = make_request()

    with pytest.raises(DeviceLostError, match="disconnected"):
        agent.run(unit_a, request)

    run = agent.run(unit_b, request)
    np.testing.assert_allclose(run.outputs["y"], expected_output(request.inputs["x"]), rtol=1e-6)
