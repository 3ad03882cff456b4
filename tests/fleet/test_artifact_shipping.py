"""An artifact reaches a unit whose host lacks the submitter's files: as bytes inside the call
(small ones) or through the object store, checked by sha256, cached once per node."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.controller.actor import DeviceActorImpl, discover_units
from ondevice_farm.errors import DeviceError
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, load_profiles
from ondevice_farm.targets import parse_targets
from ondevice_farm_agents.base import AgentSettings, RunRequest


def _request(tiny_model: Path, missing: Path) -> RunRequest:
    (target,) = parse_targets("ort/cpu") or []
    return RunRequest(
        artifact=missing,
        artifact_sha256=hashlib.sha256(tiny_model.read_bytes()).hexdigest(),
        target=target,
        inputs={"x": np.ones((1, 64), np.float32)},
        warmup=0,
        runs=2,
        profile_ops=False,
    )


def test_a_small_artifact_shipped_inline_runs_and_is_cached(tiny_model: Path, tmp_path: Path) -> None:
    settings = AgentSettings(profiles=load_profiles(DEFAULT_PROFILES_DIR))
    (unit,) = discover_units("host", settings)
    actor = DeviceActorImpl(unit, settings, cache_dir=str(tmp_path / "cache"))
    request = _request(tiny_model, tmp_path / "elsewhere" / "tiny.onnx")  # not on this "node"
    done = actor.run_job(request, tiny_model.read_bytes())
    assert len(done.run.samples_ms) == 2
    cached = tmp_path / "cache" / request.artifact_sha256 / "tiny.onnx"
    assert cached.read_bytes() == tiny_model.read_bytes()
    with pytest.raises(DeviceError, match="arrived as"):  # bytes that are not the artifact
        actor.run_job(_request(tiny_model, tmp_path / "other" / "tiny2.onnx"), b"not the model")
