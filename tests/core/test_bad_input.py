"""Bad input: one readable line on stderr, a documented exit code, nothing in the store."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from ondevice_farm.errors import ModelError, ProfileError, UsageError

from .conftest import farm


def assert_clean_failure(home: Path, result: object, code: int, *needles: str) -> None:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == code, stderr  # type: ignore[attr-defined]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("farm: error: ")
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0]
    assert result.stdout == ""  # type: ignore[attr-defined]
    assert not (home / "results.sqlite").exists()


def test_missing_model_file(home: Path, tmp_path: Path) -> None:
    result = farm(home, "submit", str(tmp_path / "nope.onnx"))
    assert_clean_failure(home, result, ModelError.exit_code, "nope.onnx", "no such file")


def test_file_that_is_not_onnx(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("these are my notes, not a model\n" * 20)
    result = farm(home, "submit", str(path))
    assert_clean_failure(home, result, ModelError.exit_code, "notes.onnx")


def test_truncated_onnx(home: Path, model: Path) -> None:
    data = model.read_bytes()
    model.write_bytes(data[: len(data) // 2])
    result = farm(home, "submit", str(model))
    assert_clean_failure(home, result, ModelError.exit_code, str(model))


def test_model_failing_the_checker(home: Path, tmp_path: Path) -> None:
    # Add takes two inputs; one given
    node = helper.make_node("Add", ["x"], ["y"], name="broken_add")
    graph = helper.make_graph(
        [node],
        "broken",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    path = tmp_path / "broken.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    result = farm(home, "submit", str(path))
    assert_clean_failure(home, result, ModelError.exit_code, "ONNX checker")


def test_unknown_device_lists_known_ones(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--devices", "pixel99")
    assert_clean_failure(home, result, UsageError.exit_code, "pixel99", "host-cpu", "pixel8", "iphone15")


def test_unknown_target_lists_known_ones(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--targets", "ort/tpu")
    assert_clean_failure(home, result, UsageError.exit_code, "ort/tpu", "ort/cpu", "coreml/ane")


def test_target_no_selected_device_supports(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--devices", "host-cpu", "--targets", "coreml/ane")
    assert_clean_failure(home, result, UsageError.exit_code, "coreml/ane", "ort/cpu")


@pytest.mark.parametrize(
    ("shape", "needle"),
    [
        ("image=1x3x96", "rank 3"),
        ("image=1x3x64x64", "dimension 2 is fixed at 96"),
        ("pixels=1x3x96x96", "'pixels'"),
        ("image=1by3", "NAME=DxDx"),
        ("image=0x3x96x96", "positive"),
    ],
)
def test_shape_that_does_not_fit(home: Path, model: Path, shape: str, needle: str) -> None:
    result = farm(home, "submit", str(model), "--shape", shape)
    assert_clean_failure(home, result, UsageError.exit_code, needle)


def test_inputs_npz_with_wrong_dtype(home: Path, model: Path, tmp_path: Path) -> None:
    import numpy as np

    npz = tmp_path / "inputs.npz"
    np.savez(npz, image=np.zeros((1, 3, 96, 96), dtype=np.float64))
    result = farm(home, "submit", str(model), "--inputs", str(npz))
    assert_clean_failure(home, result, UsageError.exit_code, "float64", "float32")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("name: host-cpu\nplatform: host\ntargets: [ort/cpu\n", "not valid YAML at line"),
        ("name: host-cpu\nplatform: host\n", "missing required field 'targets'"),
        ("name: host-cpu\nplatform: toaster\ntargets: [ort/cpu]\n", "field 'platform'"),
        ("name: host-cpu\nplatform: host\ntargets: [ort/warp]\n", "unknown target 'ort/warp'"),
        ("name: other\nplatform: host\ntargets: [ort/cpu]\n", "field 'name'"),
        ("name: host-cpu\nplatform: host\ntargets: [ort/cpu]\ncolour: red\n", "unknown field 'colour'"),
        ("name: host-cpu\nplatform: host\ntargets: [ort/cpu]\nthermal: {cooldown_s: soon}\n", "cooldown_s"),
    ],
)
def test_invalid_profile_names_file_and_field(
    home: Path, model: Path, tmp_path: Path, content: str, needle: str
) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "host-cpu.yaml").write_text(content)
    result = farm(home, "submit", str(model), profiles_dir=profiles)
    assert_clean_failure(home, result, ProfileError.exit_code, "host-cpu.yaml", needle)


def test_runs_must_be_positive(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--runs", "0")
    assert_clean_failure(home, result, UsageError.exit_code, "--runs")


def test_show_unknown_run(home: Path, model: Path) -> None:
    result = farm(home, "show", "nope")
    assert result.exit_code == UsageError.exit_code
    assert "farm: error:" in result.stderr
