"""An ONNX model whose weights are in external data files, run on a unit over ADB: the model and
its data go as one cache entry (the files where the model names them), and the runner loads it
from there. The native runner (this host's build) on a Pixel 8 and farm_runner.py on a Linux
board, each against the ADB peer; outputs are ONNX Runtime's on this host."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from ondevice_farm.artifacts import sha256_path
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.native_build import RunnerBuild
from ondevice_farm_agents.base import RunRequest
from tests.android.peer_fixtures import PeerHandle, one_unit, peer_settings
from tests.core.test_external_data import WIDTH, matmul_model

CACHE = "data/local/tmp/farm/cache"


def _request(model: Path) -> tuple[RunRequest, np.ndarray]:
    inputs = {"x": np.random.default_rng(3).standard_normal((1, WIDTH)).astype(np.float32)}
    expected = ort.InferenceSession(str(model)).run(None, inputs)[0]
    request = RunRequest(
        model, sha256_path(model), Target.parse("ort/cpu"), inputs, warmup=1, runs=3, timeout_s=60
    )
    return request, np.asarray(expected)


def _assert_cached_together(sandbox: Path) -> None:
    [entry] = [p for p in (sandbox / CACHE).glob("*/model") if p.is_dir()]
    assert sorted(p.relative_to(entry).as_posix() for p in entry.rglob("*") if p.is_file()) == [
        "model.onnx",
        "weights/w.data",
    ]


def test_the_native_runner_loads_the_model_beside_its_data(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, tmp_path: Path
) -> None:
    request, expected = _request(matmul_model(tmp_path / "exported"))
    with one_unit(peer_settings(pixel8_peer)) as (agent, unit):
        run = agent.run(unit, request)
    np.testing.assert_allclose(run.outputs["y"], expected, rtol=1e-5, atol=1e-5)
    assert len(run.samples_ms) == 3
    _assert_cached_together(pixel8_peer.sandbox)


def test_the_farm_runner_loads_the_model_beside_its_data(adb_peer: PeerHandle, tmp_path: Path) -> None:
    request, expected = _request(matmul_model(tmp_path / "exported"))
    with one_unit(peer_settings(adb_peer)) as (agent, unit):
        run = agent.run(unit, request)
    np.testing.assert_allclose(run.outputs["y"], expected, rtol=1e-5, atol=1e-5)
    _assert_cached_together(adb_peer.sandbox)
