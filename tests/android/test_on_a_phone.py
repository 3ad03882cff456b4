"""On a real phone (lab hosts only): `pytest tests/android --run-device` with
`ANDROID_TEST_ADB_ADDRESS=host:port` (wireless debugging or `adb tcpip 5555`), the native runner
built for arm64-v8a into build/native/android-arm64-v8a/runner (docs/android.md), and for the
fallback test onnxruntime_perf_test pushed to /data/local/tmp/farm/bin."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.agent import PERF_TEST, AndroidAgent
from ondevice_farm_agents.base import AgentSettings, DeviceRun, RunRequest

pytestmark = pytest.mark.device
Model = tuple[Path, str, dict[str, np.ndarray]]
RUNS = 20


def _run_on_the_phone(model: Model, target: str, runner_kind: str | None = None) -> DeviceRun:
    address = os.environ.get("ANDROID_TEST_ADB_ADDRESS")
    if not address:
        pytest.skip("set ANDROID_TEST_ADB_ADDRESS=host:port of a phone with adb over TCP")
    profiles = load_profiles()
    agent = AndroidAgent(AgentSettings(profiles=profiles, adb_tcp_addresses=(address,)))
    try:
        (unit,) = agent.discover()
        if not unit.profile:
            pytest.skip(unit.properties["hint"])
        if Target.parse(target) not in profiles[unit.profile].targets:
            pytest.skip(f"{unit.profile} has no {target}")
        if runner_kind:
            profile = profiles[unit.profile]
            profiles[unit.profile] = replace(profile, runner={**profile.runner, "kind": runner_kind})
        path, sha, inputs = model
        return agent.run(unit, RunRequest(path, sha, Target.parse(target), inputs, warmup=3, runs=RUNS))
    finally:
        agent.close()


@pytest.mark.parametrize("target", ["ort/cpu", "ort/xnnpack", "ort/nnapi", "ort/qnn"])
def test_the_native_runner_on_a_phone(target: str, small_model: Model) -> None:
    run = _run_on_the_phone(small_model, target)
    assert run.runner.startswith("farm_native_runner ") and "(Release)" in run.runner
    assert len(run.samples_ms) == RUNS and all(s > 0 for s in run.samples_ms)
    assert run.load_ms > 0 and run.first_inference_ms > 0
    assert run.peak_memory_bytes is not None and any(n.startswith("peak memory: ") for n in run.notes)
    (expected,) = ort.InferenceSession(str(small_model[0]), providers=["CPUExecutionProvider"]).run(
        ["y"], small_model[2]
    )
    # NNAPI/QNN may compute in fp16: the reference check proper is the farm's; here, the same answer
    np.testing.assert_allclose(run.outputs["y"], expected, rtol=1e-2, atol=1e-2)
    assert run.ops and all(op.provider for op in run.ops)
    if target != "ort/cpu":
        assert any("accelerator" in n or "need the CPU" in n for n in run.notes)


def test_perf_test_as_the_fallback_on_a_phone(small_model: Model) -> None:
    run = _run_on_the_phone(small_model, "ort/cpu", runner_kind=PERF_TEST)
    assert run.runner.startswith("onnxruntime_perf_test") and run.load_ms > 0
    assert run.samples_ms == [] and run.outputs == {} and "p50" in run.latency_summary_ms
    assert run.ops and {op.provider for op in run.ops} == {"CPUExecutionProvider"}
    # a second perf_test process right after the first: its session creation is the warm load
    assert run.warm_load_ms is not None and run.warm_load_ms > 0 and run.warm_load_method == "second process"
