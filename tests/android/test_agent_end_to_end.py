"""The Android agent through the real adb-shell client, the peer, and the farm runner
running the real onnxruntime inside the peer's sandbox."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from ondevice_farm.targets import Target
from ondevice_farm_agents.android.agent import AndroidAgent
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.peer_fixtures import one_unit


def _request(small_model: tuple[Path, str, dict[str, np.ndarray]], runs: int = 5) -> RunRequest:
    path, sha, inputs = small_model
    return RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=2, runs=runs, timeout_s=60)


def test_discovers_the_board_by_its_getprop_identity(android_settings: AgentSettings) -> None:
    agent = AndroidAgent(android_settings)
    try:
        units = agent.discover()
    finally:
        agent.close()
    assert [(u.profile, u.platform) for u in units] == [("linux-adb", "android")]
    assert units[0].properties["ro.product.model"] == "Linux ADB Board"
    assert units[0].properties["ro.build.version.sdk"] == "34"


def test_run_brings_back_measurements_and_the_outputs_host_onnxruntime_computes(
    android_settings: AgentSettings, small_model: tuple[Path, str, dict[str, np.ndarray]]
) -> None:
    with one_unit(android_settings) as (agent, unit):
        request = _request(small_model)
        agent.prepare(unit, request)
        run = agent.run(unit, request)
    host = ort.InferenceSession(str(small_model[0]), providers=["CPUExecutionProvider"])
    (expected,) = host.run(["y"], small_model[2])
    np.testing.assert_allclose(run.outputs["y"], expected, rtol=1e-6)
    assert len(run.samples_ms) == 5 and all(s > 0 for s in run.samples_ms)
    assert run.load_ms > 0 and run.first_inference_ms > 0
    assert run.warm_load_ms and run.warm_load_ms > 0
    assert run.warm_load_method == "second session in the same process"
    assert run.peak_memory_bytes and run.peak_memory_bytes > 1_000_000
    # ORT fuses MatMul+Add (and the Relu) at ORT_ENABLE_ALL: the profile names the fused node.
    assert run.ops and any("matmul" in op.name for op in run.ops)
    assert set(run.placement.values()) == {"CPUExecutionProvider"}
    assert run.runner.startswith("farm_runner")
