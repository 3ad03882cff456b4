"""Discovery over several addresses, units without a profile, and perf_test's input layout."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ondevice_farm.errors import UsageError
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.agent import AndroidAgent
from ondevice_farm_agents.android.test_data import write_test_data
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.peer_fixtures import start_peer


def _dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_an_unreachable_address_is_left_out_and_the_others_are_found(android_settings: AgentSettings) -> None:
    settings = replace(
        android_settings, adb_tcp_addresses=(_dead_address(), *android_settings.adb_tcp_addresses)
    )
    agent = AndroidAgent(settings)
    try:
        units = agent.discover()
    finally:
        agent.close()
    assert [u.profile for u in units] == ["linux-adb"]


def test_a_unit_without_a_profile_is_listed_with_a_hint_and_refuses_jobs(
    tmp_path: Path,
    adb_key: Path,
    android_settings: AgentSettings,
    small_model: tuple[Path, str, dict[str, np.ndarray]],
) -> None:
    peer = start_peer(
        tmp_path / "phone", adb_key, {"ro.product.model": "SM-A546B", "ro.soc.model": "s5e8835"}
    )
    agent = AndroidAgent(replace(android_settings, adb_tcp_addresses=(peer.address,)))
    try:
        (unit,) = agent.discover()
        assert unit.profile == ""
        assert "device_profiles/sm-a546b.yaml" in unit.properties["hint"]
        assert "SoC s5e8835" in unit.properties["hint"]
        path, sha, inputs = small_model
        with pytest.raises(UsageError, match="no device profile"):
            agent.run(unit, RunRequest(path, sha, Target.parse("ort/cpu"), inputs))
    finally:
        agent.close()
        peer.stop()


def test_perf_test_inputs_are_written_in_the_onnx_test_data_layout(tmp_path: Path) -> None:
    inputs = {
        "pixels": np.arange(6, dtype=np.float32).reshape(1, 6),
        "mask": np.array([[1, 0]], dtype=np.int64),
    }
    files = write_test_data(inputs, tmp_path)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "test_data_set_0/input_0.pb",
        "test_data_set_0/input_1.pb",
    ]
    for path, (name, array) in zip(files, inputs.items(), strict=True):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        assert tensor.name == name
        np.testing.assert_array_equal(numpy_helper.to_array(tensor), array)
