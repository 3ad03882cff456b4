"""If nodes on CoreML: a constant condition inlines its taken branch; `fixed_inputs` (`--fix`)
pins the scalar input a condition depends on, as a voice-activity model's sample rate; an If
that stays undecided is refused naming the way out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ondevice_farm.errors import CompileError, UsageError
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target
from tests.coreml.harness import ort_outputs, save

pytest.importorskip("coremltools")

X = np.arange(8, dtype=np.float32).reshape(1, 8) - 3.0


def _branch(
    name: str, shape: list[int], factor: float, nested: onnx.NodeProto | None = None
) -> onnx.GraphProto:
    """A branch reading x from the outer scope: x * factor reshaped to `shape` (by a Reshape
    whose shape differs per branch, as the sample-rate branches of a VAD model do)."""
    nodes = [
        helper.make_node("Mul", ["x", f"{name}_factor"], [f"{name}_scaled"]),
        helper.make_node("Reshape", [f"{name}_scaled", f"{name}_shape"], [f"{name}_out"]),
    ]
    inits = [
        onnx.numpy_helper.from_array(np.array(factor, np.float32), f"{name}_factor"),
        onnx.numpy_helper.from_array(np.array(shape, np.int64), f"{name}_shape"),
    ]
    outputs = [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, ["p", "q"])]
    if nested is not None:
        nodes = [
            nested,
            *nodes[:1],
            helper.make_node("Reshape", [f"{name}_scaled", "inner_out"], [f"{name}_out"]),
        ]
        inits = inits[:1]
    return helper.make_graph(nodes, name, [], outputs, inits)


def _vad_like(nested: bool = False) -> onnx.ModelProto:
    """x [1, 8] and a scalar int64 sr; y = x*2 as [2, 4] when sr == 16000, x*3 as [4, 2] else."""
    inner = None
    if nested:
        # inside the 16 kHz branch, a second If on the same input picks the shape
        wide = helper.make_graph(
            [helper.make_node("Identity", ["wide"], ["wide_out"])], "wide", [],
            [helper.make_tensor_value_info("wide_out", TensorProto.INT64, [2])],
            [onnx.numpy_helper.from_array(np.array([2, 4], np.int64), "wide")],
        )  # fmt: skip
        tall = helper.make_graph(
            [helper.make_node("Identity", ["tall"], ["tall_out"])], "tall", [],
            [helper.make_tensor_value_info("tall_out", TensorProto.INT64, [2])],
            [onnx.numpy_helper.from_array(np.array([8, 1], np.int64), "tall")],
        )  # fmt: skip
        inner = helper.make_node("If", ["is_16k"], ["inner_out"], then_branch=wide, else_branch=tall)
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["sr", "rate"], ["is_16k"]),
            helper.make_node(
                "If", ["is_16k"], ["y"], name="pick_rate",
                then_branch=_branch("then", [2, 4], 2.0, inner), else_branch=_branch("else", [4, 2], 3.0),
            ),
        ],
        "vad_like",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["p", "q"])],
        [onnx.numpy_helper.from_array(np.array(16000, np.int64), "rate")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("rate", [16000, 8000])
@pytest.mark.parametrize("nested", [False, True])
def test_a_pinned_input_folds_its_ifs_to_the_taken_branch(rate: int, nested: bool, tmp_path: Path) -> None:
    path = save(_vad_like(nested), tmp_path)
    expected = ort_outputs(path, {"x": X, "sr": np.array(rate, np.int64)})["y"]
    got = predict_drift(path, {"x": X}, precision="fp32", fixed_inputs={"sr": rate})["y"]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_the_compile_report_says_which_inputs_were_pinned(tmp_path: Path) -> None:
    path = save(_vad_like(), tmp_path)
    artifact = compile_coreml(path, Target.parse("coreml/ane"), tmp_path / "out", fixed_inputs={"sr": 16000})
    extra = artifact.report.extra
    assert extra["fixed_inputs"] == {"sr": 16000}
    assert extra["folded"].get("If") == 1
    assert [entry["onnx_name"] for entry in extra["inputs"]] == ["x"]
    assert any("sr pinned to 16000" in note for note in artifact.report.notes)


def test_an_undecided_if_is_refused_naming_the_node_and_the_fix(tmp_path: Path) -> None:
    path = save(_vad_like(), tmp_path)
    with pytest.raises(CompileError, match=r"If x1: pick_rate \(.*--fix NAME=VALUE"):
        predict_drift(path, {"x": X, "sr": np.array(16000, np.int64)}, precision="fp32")


@pytest.mark.parametrize(
    ("fixed", "message"),
    [
        ({"rate_hz": 16000}, "does not have as an input"),
        ({"x": 1.0}, "only a scalar"),
        ({"sr": 0.5}, "cannot hold"),
    ],
)
def test_a_pin_that_cannot_apply_is_a_usage_error(
    fixed: dict[str, float], message: str, tmp_path: Path
) -> None:
    path = save(_vad_like(), tmp_path)
    with pytest.raises(UsageError, match=message):
        predict_drift(path, {"x": X}, precision="fp32", fixed_inputs=fixed)


def test_farm_compile_fix_pins_the_input(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ondevice_farm.cli.main import cli

    path = save(_vad_like(), tmp_path)
    home = ["--home", str(tmp_path / "home")]
    args = ["compile", str(path), "--targets", "coreml/ane", "--json"]
    refused = CliRunner().invoke(cli, [*home, *args])
    assert refused.exit_code == 5 and "--fix" in refused.output
    result = CliRunner().invoke(cli, [*home, *args, "--fix", "sr=16000"])
    assert result.exit_code == 0, result.output
    (target,) = json.loads(result.stdout)["targets"]
    assert target["report"]["extra"]["fixed_inputs"] == {"sr": 16000}
    bad = CliRunner().invoke(cli, [*home, *args, "--fix", "sr"])
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.output


def test_unsupported_ops_sees_what_a_pin_folds(tmp_path: Path) -> None:
    from ondevice_farm.runtimes.coreml.compile import unsupported_ops

    path = save(_vad_like(), tmp_path)
    assert unsupported_ops(path) == [("If", "pick_rate")]
    assert unsupported_ops(path, fixed_inputs={"sr": 8000}) == []
