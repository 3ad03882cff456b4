"""A failure whose cause may be a dynamic dim the farm sized names it: a compile's refusal (any
runtime's CompileError, here ONNX Runtime's), the host reference run and a failed job say which
inputs have dynamic dims that no --shape pinned, the sizes the farm gave them, and the --shape
that pins them. A model whose inputs are all static or pinned gets no such note."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.client import FleetClient
from ondevice_farm.controller.job_context import JobEnd
from ondevice_farm.controller.job_writer import document_for
from ondevice_farm.controller.pipeline import PlannedModel, plan_model
from ondevice_farm.controller.submission import prepare
from ondevice_farm.controller.submit_request import SubmitRequest
from ondevice_farm.errors import CompileError, DeviceError, DeviceLostError, FarmError, ModelError
from ondevice_farm.profiles import load_profiles
from ondevice_farm.progress import SilentProgress
from ondevice_farm.targets import Target
from tests.core.conftest import farm
from tests.core.dynamic_dim_models import LONG, frames, relu, unknown_op

CPU = Target.parse("ort/cpu")
NOTE = "dynamic dims that no --shape pinned"


def test_a_compile_refusal_names_the_unpinned_dims_and_the_shape_that_pins_them(
    home: Path, tmp_path: Path
) -> None:
    model = unknown_op(tmp_path / "unknown.onnx")

    result = farm(home, "compile", str(model), "-t", "ort/cpu", "--json")

    assert result.exit_code == CompileError.exit_code
    [entry] = json.loads(result.stdout)["targets"]
    error = entry["error"]
    assert error.startswith("ONNX Runtime cannot load the model") and "farm.test:Unknown" in error
    assert f"{NOTE}: x[batch, sequence], set to 1 by the farm (x=1x1)" in error
    assert error.endswith("pin them at the sizes the model takes: --shape x=BATCHxSEQUENCE")
    assert "\n" not in error  # one line, as the refusal was


@pytest.mark.parametrize(
    ("shape", "args"),
    [(("batch", "sequence"), ("--shape", "x=2x8")), ((2, 8), ())],
    ids=["pinned", "static"],
)
def test_a_compile_refusal_with_every_dim_pinned_or_static_has_no_note(
    home: Path, tmp_path: Path, shape: tuple[str | int, ...], args: tuple[str, ...]
) -> None:
    model = unknown_op(tmp_path / "unknown.onnx", shape)

    result = farm(home, "compile", str(model), "-t", "ort/cpu", "--json", *args)

    assert result.exit_code == CompileError.exit_code
    [entry] = json.loads(result.stdout)["targets"]
    assert "farm.test:Unknown" in entry["error"]
    assert NOTE not in entry["error"] and "--shape" not in entry["error"]


def _plan(
    tmp_path: Path,
    model: Path,
    shapes: dict[str, tuple[int, ...]] | None = None,
    inputs_npz: Path | None = None,
) -> PlannedModel:
    request = SubmitRequest(
        model_path=model, devices="host-cpu", targets=[CPU], shapes=shapes or {}, inputs_npz=inputs_npz
    )
    prepared = prepare(request, load_profiles())
    home = FarmHome(tmp_path / "home")
    home.ensure()
    # an embedded client ships nothing: planning needs no fleet
    client = FleetClient(fleet=None, embedded=True)
    return plan_model(request, prepared, "run-1", home=home, client=client, progress=SilentProgress())


def test_a_reference_run_that_fails_at_the_farms_size_names_the_dims(tmp_path: Path) -> None:
    model = frames(tmp_path / "frames.onnx")

    with pytest.raises(ModelError) as failed:
        _plan(tmp_path, model)

    assert "the reference run failed" in failed.value.message
    assert failed.value.message.endswith(
        f"; {NOTE}: x[batch, sequence], set to 1 by the farm (x=1x1); "
        "pin them at the sizes the model takes: --shape x=BATCHxSEQUENCE"
    )
    # not "pass a valid .onnx file": the model is valid, its size is not
    assert "--shape" in failed.value.hint
    # pinned, it runs
    assert _plan(tmp_path, model, shapes={"x": (1, LONG)}).reference["y"].shape == (1, 1, 7)


def _failed_job(planned: PlannedModel, error: FarmError) -> str:
    [context] = planned.contexts.values()
    end = JobEnd(queued_at=0.0, started_at=0.0, finished_at=1.0, error=error)
    document = document_for(context, end)
    assert document["status"] == "failed"
    message: str = document["error"]
    return message


def test_a_failed_job_names_the_dims_at_the_sizes_its_inputs_had(tmp_path: Path) -> None:
    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.ones((1, LONG), np.float32))
    planned = _plan(tmp_path, relu(tmp_path / "relu.onnx"), inputs_npz=npz)

    message = _failed_job(planned, DeviceError("pixel8-1: a repeat's session failed: bad input"))

    assert message == (
        f"pixel8-1: a repeat's session failed: bad input; {NOTE}: x[batch, sequence], the farm used "
        f"x=1x{LONG}; pin them at the sizes the model takes: --shape x=BATCHx{LONG}"
    )
    # a lost unit says nothing of the inputs
    assert NOTE not in _failed_job(planned, DeviceLostError("pixel8-1 disconnected"))


def test_a_failed_job_of_a_pinned_model_has_no_note(tmp_path: Path) -> None:
    planned = _plan(tmp_path, relu(tmp_path / "relu.onnx"), shapes={"x": (1, LONG)})

    assert _failed_job(planned, DeviceError("pixel8-1: bad input")) == "pixel8-1: bad input"
