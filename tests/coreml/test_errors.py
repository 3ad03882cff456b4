"""What a user sees when a model cannot be compiled for CoreML: one clear error, not a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from ondevice_farm.errors import CompileError, ModelError, UsageError
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift, unsupported_ops
from ondevice_farm.targets import Target
from tests.coreml.harness import save
from tests.coreml.onnx_models import Graph, single_op

ANE = Target.parse("coreml/ane")


def _model_with_unsupported_ops() -> Graph:
    g = Graph()
    x = g.input("x", [1, 8, 4, 4])
    y = g.one("Relu", [x])
    y = g.one("Shrink", [y])
    y = g.one("LpNormalization", [y], axis=1)
    y = g.one("Shrink", [y])
    y = g.one("Hardmax", [y])

    # Mod only ever sees constants: folded away, so not reported
    g.output(g.one("Add", [y, g.one("Mod", [g.const(np.float32(7.0)), g.const(np.float32(4.0))], fmod=1)]))
    # a supported op with attributes the lowering cannot take; the Relu fed by it is not blamed
    dropped = g.one("Dropout", [x, g.const(np.float32(0.5)), g.const(np.array(True))])
    g.output(g.one("Relu", [dropped]))
    return g


def test_every_unsupported_op_is_listed_with_its_node(tmp_path: Path) -> None:
    path = save(_model_with_unsupported_ops().model(), tmp_path)
    found = unsupported_ops(path)
    assert [op for op, _ in found] == ["Shrink", "LpNormalization", "Shrink", "Hardmax", "Dropout"]
    assert all(name for _, name in found)


def test_compile_stops_with_one_error_naming_types_counts_and_nodes(tmp_path: Path) -> None:
    path = save(_model_with_unsupported_ops().model(), tmp_path)
    with pytest.raises(CompileError) as caught:
        compile_coreml(path, ANE, tmp_path / "out")
    message = str(caught.value)
    assert "5 node(s) of 4 op type(s)" in message
    assert "Shrink x2" in message and "Hardmax x1" in message and "LpNormalization x1" in message
    assert "Dropout x1" in message and "training-mode Dropout is random" in message
    for _, name in unsupported_ops(path):
        assert name in message
    assert caught.value.exit_code == 5
    assert not (tmp_path / "out" / "model.mlpackage").exists()


def test_supported_model_has_nothing_unsupported(tmp_path: Path) -> None:
    assert unsupported_ops(save(single_op("Relu", [[1, 3]]), tmp_path)) == []


def test_attributes_outside_the_lowering_name_the_node(tmp_path: Path) -> None:
    # an If decided only at run time: the lowering names the node and the way to fold it
    g = Graph()
    g.input("x", [1, 3])  # the branches read it from the outer scope
    flag = g.input("flag", [], TensorProto.BOOL)
    then, other = (
        helper.make_graph(
            [helper.make_node(op, ["x"], [f"{op}_out"])], op, [],
            [helper.make_tensor_value_info(f"{op}_out", TensorProto.FLOAT, [1, 3])],
        )
        for op in ("Relu", "Neg")
    )  # fmt: skip
    g.nodes.append(helper.make_node("If", [flag], ["y"], name="If_1", then_branch=then, else_branch=other))
    g.output("y")
    path = save(g.model(), tmp_path)
    with pytest.raises(CompileError, match=r"If x1: If_1 \(its condition 'flag' is known only at run time"):
        compile_coreml(path, ANE, tmp_path / "out")


def test_garbage_file_is_a_model_error(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x00\xffthis is not a protobuf" * 10)
    with pytest.raises(ModelError, match="not an ONNX model"):
        compile_coreml(path, ANE, tmp_path / "out")
    with pytest.raises(ModelError):
        unsupported_ops(path)


def test_model_that_fails_the_checker_is_a_model_error(tmp_path: Path) -> None:
    node = helper.make_node("Relu", ["missing"], ["y"])
    graph = helper.make_graph(
        [node],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "bad.onnx"
    path.write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    )
    with pytest.raises(ModelError, match=r"onnx\.checker"):
        compile_coreml(path, ANE, tmp_path / "out")


def test_missing_model_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        predict_drift(tmp_path / "nope.onnx", {})


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    path = save(single_op("Relu", [[1, 3]]), tmp_path)
    with pytest.raises(UsageError, match="not a CoreML target"):
        compile_coreml(path, Target.parse("ort/cpu"), tmp_path / "out")
    with pytest.raises(UsageError, match="precision"):
        compile_coreml(path, ANE, tmp_path / "out", precision="int8")
    with pytest.raises(UsageError, match="iOS14"):
        compile_coreml(path, ANE, tmp_path / "out", minimum_deployment_target="iOS14")
    with pytest.raises(ModelError, match="does not have"):
        compile_coreml(path, ANE, tmp_path / "out", input_shapes={"image": (1, 3)})
    with pytest.raises(UsageError, match="x0"):
        predict_drift(path, {})
