"""`farm submit --fix NAME=VALUE`: a pinned scalar input replaces the generated one in the whole
run (the host reference and every target's job), the run document records it, and a CoreML job,
whose ML Program holds the input as a constant, is not sent it. A pin that cannot apply fails in
one line before anything is stored. The end-to-end `farm submit --fix` is in test_submit_host.py
(it shares that module's Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.api.wire import SubmitOptions
from ondevice_farm.compile.io_names import Feature, IoNameMap
from ondevice_farm.compile.report import CompiledArtifact, CompileReport
from ondevice_farm.controller.pipeline import run_request
from ondevice_farm.controller.submission import prepare, run_document
from ondevice_farm.controller.submit_request import SubmitRequest
from ondevice_farm.errors import UsageError
from ondevice_farm.profiles import load_profiles
from ondevice_farm.runtimes.coreml.compile.pinning import parse_fixes
from ondevice_farm.targets import Target

from .conftest import farm
from .pinned_model import X, sample_rate_branch


@pytest.fixture
def vad_like(tmp_path: Path) -> Path:
    return sample_rate_branch(tmp_path / "vad_like.onnx")


def _request(model: Path, **fields: object) -> SubmitRequest:
    return SubmitRequest(model_path=model, devices="host-cpu", targets=[Target.parse("ort/cpu")], **fields)  # type: ignore[arg-type]


def test_fix_parses_as_compile_parses_it() -> None:
    assert parse_fixes(("sr=16000", "gain")) == {"sr": 16000.0, "gain": None}
    for bad in ("sr=fast", "=3", ""):
        with pytest.raises(UsageError, match="NAME=VALUE"):
            parse_fixes((bad,))


def test_fix_crosses_the_wire_and_parses_into_the_request(tmp_path: Path) -> None:
    options = SubmitOptions(targets="ort/cpu", fixes=("sr=16000", "gain"))
    again = SubmitOptions.from_json(json.loads(json.dumps(options.to_json())))
    assert again == options
    npz = tmp_path / "in.npz"
    assert again.request(Path("m.onnx"), npz).fixed_inputs == {"sr": 16000.0, "gain": None}
    # `--fix NAME` alone takes its value from --inputs: without one it is refused at once
    with pytest.raises(UsageError, match="--fix gain has no value"):
        again.request(Path("m.onnx"))
    with pytest.raises(UsageError, match="fixes"):
        SubmitOptions.from_json({"fixes": "sr=16000"})


def test_prepare_replaces_the_generated_input_and_the_run_records_the_pin(vad_like: Path) -> None:
    profiles = load_profiles()
    seeded = prepare(_request(vad_like), profiles)
    assert int(seeded.inputs["sr"]) != 16000 and seeded.fixed_inputs == {}

    prepared = prepare(_request(vad_like, fixed_inputs={"sr": 16000.0}), profiles)

    assert prepared.inputs["sr"].dtype == np.int64 and prepared.inputs["sr"].shape == ()
    assert int(prepared.inputs["sr"]) == 16000
    np.testing.assert_array_equal(prepared.inputs["x"], seeded.inputs["x"])  # the rest stays seeded
    assert prepared.fixed_inputs == {"sr": 16000.0}
    document = run_document("r", _request(vad_like, fixed_inputs={"sr": 16000.0}), prepared)
    assert document["settings"]["fixed_inputs"] == {"sr": 16000}
    assert "fixed_inputs" not in run_document("r", _request(vad_like), seeded)["settings"]


def test_fix_without_a_value_takes_it_from_the_inputs_file(vad_like: Path, tmp_path: Path) -> None:
    npz = tmp_path / "in.npz"
    np.savez(npz, x=X, sr=np.array(8000, np.int64))
    prepared = prepare(_request(vad_like, inputs_npz=npz, fixed_inputs={"sr": None}), load_profiles())
    assert prepared.fixed_inputs == {"sr": 8000.0} and int(prepared.inputs["sr"]) == 8000
    np.savez(npz, x=X)
    with pytest.raises(UsageError, match="has no array 'sr'"):
        prepare(_request(vad_like, inputs_npz=npz, fixed_inputs={"sr": None}), load_profiles())


@pytest.mark.parametrize(
    ("fixed", "says"),
    [
        ({"rate_hz": 16000.0}, "does not have as an input"),
        ({"x": 1.0}, "only a scalar"),
        ({"sr": 0.5}, "int64, which cannot hold it"),
    ],
)
def test_a_pin_that_cannot_apply_is_refused_with_the_lowerings_checks(
    vad_like: Path, fixed: dict[str, float | None], says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        prepare(_request(vad_like, fixed_inputs=fixed), load_profiles())


def _artifact(target: str, io_names: IoNameMap | None) -> CompiledArtifact:
    report = CompileReport(target, 2, 2, {}, {}, [])
    return CompiledArtifact(Target.parse(target), Path("/a/model"), "0" * 64, report, io_names)


def test_a_coreml_job_is_not_sent_the_input_its_program_folded(vad_like: Path) -> None:
    request = _request(vad_like, fixed_inputs={"sr": 16000.0})
    prepared = prepare(request, load_profiles())
    # the CoreML compile's I/O map: `sr` is a constant of the ML Program, not one of its inputs
    program = IoNameMap(
        inputs=(Feature("x", "x", "float32", (1, 16)),), outputs=(Feature("y", "y", "float32", (1, 16)),)
    )

    coreml_job = run_request(request, prepared, _artifact("coreml/ane", program))
    ort_job = run_request(request, prepared, _artifact("ort/cpu", None))

    assert sorted(coreml_job.inputs) == ["x"]
    assert sorted(ort_job.inputs) == ["sr", "x"] and int(ort_job.inputs["sr"]) == 16000


def test_farm_submit_refuses_a_bad_pin_before_storing_anything(vad_like: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = farm(home, "submit", str(vad_like), "-t", "ort/cpu", "--fix", "sr=0.5")
    assert result.exit_code == 2
    assert "--fix sr=0.5: sr is int64, which cannot hold it" in result.stderr
    assert not (home / "references").exists() and not (home / "results.sqlite").exists()


def test_a_checkpoint_takes_no_pin(tmp_path: Path) -> None:
    # its eager reference is computed from inputs the ingest makes: a pin would miss it
    request = _request(tmp_path / "net.pt2", fixed_inputs={"sr": 16000.0})
    with pytest.raises(UsageError, match="a PyTorch checkpoint takes none"):
        prepare(request, load_profiles())
