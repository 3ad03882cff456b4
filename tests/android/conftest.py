"""Android tests: an ADB peer on loopback per test (see `peer_fixtures`), and a small model."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ondevice_farm_agents.android.native_build import NativeBuildError, RunnerBuild, build
from tests.android.peer_fixtures import adb_key, adb_peer, android_settings, pixel8_peer  # noqa: F401

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, np.ndarray]]:
    """y = relu(x @ W + b): a model file, its sha256, and seeded inputs."""
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((8, 4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
            helper.make_node("Add", ["xw", "b"], ["z"], name="add"),
            helper.make_node("Relu", ["z"], ["y"], name="relu"),
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [onnx.numpy_helper.from_array(weights, "W"), onnx.numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("model") / "small.onnx"
    path.write_bytes(model.SerializeToString())
    inputs = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    return path, hashlib.sha256(path.read_bytes()).hexdigest(), inputs


@pytest.fixture(scope="session")
def native_runner() -> RunnerBuild:
    """The native runner built for this host (cached in build/native: seconds when unchanged).

    Its downloads come from `python -m ondevice_farm_agents.android.native_build fetch`, which
    scripts/test runs before the tests cut the network; without them this fails rather than skips.
    """
    try:
        return build("linux-x86_64")
    except NativeBuildError as exc:
        pytest.fail(f"the native runner could not be built: {exc} ({exc.hint})")
