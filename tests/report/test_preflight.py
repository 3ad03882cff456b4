"""Pre-flight predictions from the documented operator tables, and `farm check`."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.preflight import predict
from ondevice_farm.preflight.support import COREML_LOWERING_SOURCE
from tests.report.conftest import TINYNET, farm
from tests.report.recorded import conv_resize_model


def test_tinynet_against_each_table() -> None:
    by_target = {p.target: p for p in predict(TINYNET, ["ort/nnapi", "ort/xnnpack", "ort/qnn", "ort/cpu"])}
    nnapi, xnnpack, qnn, cpu = (by_target[t] for t in ("ort/nnapi", "ort/xnnpack", "ort/qnn", "ort/cpu"))
    # ORT folds BatchNormalization into Conv before partitioning: 41 nodes reach the providers
    assert nnapi.nodes_checked == 41 and nnapi.unsupported == []
    assert any(
        note == "2D only; weights and bias constant" for _, op, note in nnapi.conditional if op == "Conv"
    )
    assert sorted({u.op_type for u in xnnpack.unsupported}) == ["Add", "Flatten", "GlobalAveragePool"]
    assert {op for _, op, _ in xnnpack.conditional if op == "Clip"} == {"Clip"}  # fused into the Conv only
    assert qnn.unsupported == [] and qnn.source.endswith("op_builder_factory.cc")
    assert not cpu.known and cpu.unsupported == []


def test_unsupported_op_is_named_with_its_source(tmp_path: Path) -> None:
    [xnnpack] = predict(conv_resize_model(tmp_path / "m.onnx"), ["ort/xnnpack"])
    assert xnnpack.unsupported == []  # Conv and Resize both have XNNPACK kernels
    [nnapi] = predict(conv_resize_model(tmp_path / "m.onnx"), ["ort/nnapi"])
    assert [(n, op) for n, op, _ in nnapi.conditional] == [("/conv/Conv", "Conv"), ("/Resize", "Resize")]
    assert "nnapi_supported_ops.md" in nnapi.source


def test_coreml_uses_the_lowering_table_or_degrades_to_the_documented_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [with_table] = predict(TINYNET, ["coreml/ane"])
    real_import = builtins.__import__

    def no_lowering(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("ondevice_farm.runtimes.coreml.compile"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_lowering)
    [without] = predict(TINYNET, ["coreml/ane"])
    assert without.known and without.source.endswith("coreml_supported_mlprogram_ops.md")
    assert sorted({u.op_type for u in without.unsupported}) == ["BatchNormalization", "Flatten"]
    if with_table.source == COREML_LOWERING_SOURCE:
        assert with_table.nodes_checked == 61


def test_farm_check_json(tmp_path: Path) -> None:
    done = farm(tmp_path, "check", str(TINYNET), "--targets", "ort/xnnpack,ort/cpu", "--json")
    assert done.returncode == 0, done.stderr
    targets = json.loads(done.stdout)["targets"]
    assert [t["target"] for t in targets] == ["ort/xnnpack", "ort/cpu"]
    assert targets[0]["unsupported_op_types"] == ["Add", "Flatten", "GlobalAveragePool"]


def test_farm_check_rejects_an_unknown_target(tmp_path: Path) -> None:
    done = farm(tmp_path, "check", str(TINYNET), "--targets", "ort/tpu")
    assert done.returncode == 2 and "unknown target 'ort/tpu'" in done.stderr


def test_an_op_nothing_takes_is_named_for_every_target(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["y"], name="relu"),
            helper.make_node("NonZero", ["y"], ["z"], name="nz"),
        ],
        "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.INT64, [2, "n"])],
    )
    path = tmp_path / "nonzero.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    for prediction in predict(path, ["ort/nnapi", "ort/xnnpack", "ort/qnn", "coreml/ane"]):
        assert [(u.node, u.op_type) for u in prediction.unsupported][-1] == ("nz", "NonZero"), (
            prediction.target
        )
    [coreml] = predict(path, ["coreml/ane"])
    if coreml.source == COREML_LOWERING_SOURCE:  # the lowering itself was asked, with its reason
        assert coreml.unsupported[0].reason == "the CoreML lowering refuses it: no lowering for this op type"
