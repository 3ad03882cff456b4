"""On a real phone (lab hosts only): `pytest tests/android --run-device` with
`ANDROID_TEST_ADB_ADDRESS=host:port` (wireless debugging or `adb tcpip 5555`) and
onnxruntime_perf_test pushed to /data/local/tmp/farm/bin (see docs/android.md)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from agents.android.agent import AndroidAgent
from agents.base import AgentSettings, RunRequest
from farm.profiles import load_profiles
from farm.targets import Target

pytestmark = pytest.mark.device


@pytest.mark.parametrize("target", ["ort/cpu", "ort/xnnpack", "ort/nnapi"])
def test_perf_test_on_a_phone(target: str, small_model: tuple[Path, str, dict[str, np.ndarray]]) -> None:
    address = os.environ.get("ANDROID_TEST_ADB_ADDRESS")
    if not address:
        pytest.skip("set ANDROID_TEST_ADB_ADDRESS=host:port of a phone with adb over TCP")
    agent = AndroidAgent(AgentSettings(profiles=load_profiles(), adb_tcp_addresses=(address,)))
    try:
        (unit,) = agent.discover()
        if not unit.profile:
            pytest.skip(unit.properties["hint"])
        path, sha, inputs = small_model
        request = RunRequest(path, sha, Target.parse(target), inputs, runs=20)
        run = agent.run(unit, request)
    finally:
        agent.close()
    assert run.load_ms > 0 and run.ops
    assert any("latency p50" in note for note in run.notes)
