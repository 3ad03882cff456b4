"""A model with PyTorch-style tensor names through the whole iOS path: the CoreML compile and its
I/O name map, the job file under the ML Program's feature names, the host stand-in running the
compiled ML Program under those names, and the outputs back under their ONNX names, passing the
reference check."""

from __future__ import annotations

import dataclasses
import json
import shutil
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ondevice_farm.analysis.job import job_document
from ondevice_farm.analysis.numeric import default_tolerance
from ondevice_farm.artifacts import ArtifactStore, sha256_path
from ondevice_farm.compile import compile_for_target
from ondevice_farm.compile.io_names import load_io_names, sidecar_path
from ondevice_farm.errors import DeviceError
from ondevice_farm.reference import reference_outputs
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import RunRequest
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID, IosAgent
from ondevice_farm_agents.ios.fakes import AppFiles, FakeProcess

from .conftest import MakeAgent, MakePhone
from .renamed_model import EXPECTED_INPUTS, EXPECTED_OUTPUTS, renamed_inputs, write_renamed_model

pytest.importorskip("coremltools")
ANE = Target.parse("coreml/ane")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("renamed")
    model = write_renamed_model(root / "torch_named.onnx")
    return model, compile_for_target(model, ANE, ArtifactStore(root / "artifacts"))


def test_the_compile_stores_one_name_map_with_the_artifact(compiled: tuple[Path, object]) -> None:
    _, artifact = compiled
    io_names = artifact.io_names  # type: ignore[attr-defined]
    assert {f.onnx_name: f.feature_name for f in io_names.inputs} == EXPECTED_INPUTS
    outputs = {f.onnx_name: f.feature_name for f in io_names.outputs}
    assert all(fnmatch(outputs[k], v) for k, v in EXPECTED_OUTPUTS.items()) and len(outputs) == 3, outputs
    assert len(set(outputs.values())) == 3  # names that collide after sanitising stay apart
    assert [(f.dtype, f.shape) for f in io_names.inputs] == [
        ("float32", (1, 2, 6, 6)),
        ("float32", (1, 4, 6, 6)),
    ]
    stored = load_io_names(artifact.path)  # type: ignore[attr-defined]
    assert stored == io_names
    assert sidecar_path(artifact.path).is_file()  # type: ignore[attr-defined]
    # the map is beside the package, not in it: the package's content hash is the package's
    assert sha256_path(artifact.path) == artifact.sha256  # type: ignore[attr-defined]


def _request(compiled: object, **changes: object) -> RunRequest:
    request = RunRequest(
        artifact=compiled.path,  # type: ignore[attr-defined]
        artifact_sha256=compiled.sha256,  # type: ignore[attr-defined]
        target=ANE,
        inputs=renamed_inputs(),
        warmup=1,
        runs=3,
        io_names=compiled.io_names,  # type: ignore[attr-defined]
    )
    return dataclasses.replace(request, **changes)  # type: ignore[arg-type]


def test_the_stand_in_runs_the_ml_program_under_its_feature_names_and_the_reference_passes(
    ios_agent: IosAgent, compiled: tuple[Path, object], tmp_path: Path
) -> None:
    model, artifact = compiled
    (unit,) = ios_agent.discover()
    request = _request(artifact)
    ios_agent.prepare(unit, request)

    run = ios_agent.run(unit, request)

    assert set(run.outputs) == set(EXPECTED_OUTPUTS)  # back under the ONNX names
    assert "stand-in" in run.runner and len(run.samples_ms) == 3
    assert {op.op_type for op in run.ops} >= {"conv", "relu", "add", "sigmoid"}  # MIL ops, not ONNX ones
    reference = reference_outputs(model, "torch-named", request.inputs, tmp_path / "refs")
    document = job_document(
        base={"job_id": "j", "device": "iphone15", "target": ANE.name},
        target=ANE,
        artifact=artifact,  # type: ignore[arg-type]
        run=run,
        reference=reference,
        tolerance=default_tolerance(ANE, artifact.report.precision),
    )
    assert document["reference"]["missing_outputs"] == []
    assert set(document["reference"]["outputs"]) == set(EXPECTED_OUTPUTS)
    assert document["reference"]["passed"] is True, json.dumps(document["reference"], indent=1)
    # fp16 storage between ops: close to the reference, not equal to it
    np.testing.assert_allclose(run.outputs["out:0"], reference["out:0"], atol=2e-2)


def test_without_the_name_map_the_job_names_features_the_ml_program_lacks(
    ios_agent: IosAgent, compiled: tuple[Path, object], tmp_path: Path
) -> None:
    # the failure the map prevents: ONNX names in the job file, as before the map existed
    _, artifact = compiled
    bare = tmp_path / "bare"
    bare.mkdir()
    package = bare / "model.mlpackage"

    shutil.copytree(artifact.path, package)  # type: ignore[attr-defined]
    (unit,) = ios_agent.discover()
    request = _request(artifact, artifact=package, io_names=None)

    with pytest.raises(DeviceError, match=r"FarmRunner failed at job .*no feature 'input\.1'"):
        ios_agent.run(unit, request)


def test_the_job_file_names_features_and_carries_the_onnx_names(
    make_agent: MakeAgent, make_phone: MakePhone, compiled: tuple[Path, object]
) -> None:
    _, artifact = compiled
    phone = make_phone()
    standin = phone.apps[DEFAULT_BUNDLE_ID].program
    assert standin is not None
    seen: list[dict[str, Any]] = []

    def recording(files: AppFiles, arguments: list[str], process: FakeProcess) -> None:
        seen.append(json.loads(files.read(arguments[arguments.index("--farm-job") + 1])))
        standin(files, arguments, process)

    phone.apps[DEFAULT_BUNDLE_ID].program = recording
    agent = make_agent(phone)
    (unit,) = agent.discover()

    run = agent.run(unit, _request(artifact))

    (job,) = seen
    assert {t["onnx_name"]: t["name"] for t in job["inputs"]} == EXPECTED_INPUTS
    io_names = artifact.io_names  # type: ignore[attr-defined]
    assert job["outputs"] == [{"name": f.feature_name, "onnx_name": f.onnx_name} for f in io_names.outputs]
    assert set(run.outputs) == set(EXPECTED_OUTPUTS)
