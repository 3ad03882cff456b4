"""The CoreML compile report: what coremltools did, in the shape of the ONNX Runtime report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target
from tests.coreml.harness import random_feeds, save
from tests.coreml.onnx_models import Graph, f32, transformer_encoder

ct = pytest.importorskip("coremltools")
ANE = Target.parse("coreml/ane")
macos_only = pytest.mark.skipif(
    sys.platform != "darwin", reason="CoreML predict and MLComputePlan need macOS"
)


def _dense_block() -> Graph:
    g = Graph()
    x = g.input("x", [2, 8])
    y = g.one("Add", [g.one("MatMul", [x, g.const(f32(8, 4))]), g.const(f32(4, seed=1))])
    g.output(g.one("Relu", [y]))
    return g


def test_fp16_report_counts_casts_and_fusions(tmp_path: Path) -> None:
    path = save(_dense_block().model(), tmp_path)
    report = compile_coreml(path, ANE, tmp_path / "out").report
    assert report.nodes_before == 3
    assert report.op_types_before == {"MatMul": 1, "Add": 1, "Relu": 1}
    assert report.extra["mil_ops_lowered"]["op_types"] == {"matmul": 1, "add": 1, "relu": 1}
    # coremltools folds matmul + bias add into one linear op
    assert report.op_types_after == {"linear": 1, "relu": 1, "cast": 2}
    assert report.nodes_after == 4
    fusions = {f.op_type: (f.before, f.after) for f in report.fusions}
    assert fusions == {"linear": (0, 1), "matmul": (1, 0), "add": (1, 0)}
    assert report.fusions[0].op_type == "linear" and report.fusions[0].appeared
    assert report.precision == "fp16"
    assert report.extra["casts_inserted"] == 2
    assert {c["to"] for c in report.extra["casts"]} == {"fp16", "fp32"}
    assert any("fp16" in note for note in report.notes)
    assert report.extra["inputs"] == [
        {"name": "x", "onnx_name": "x", "dtype": "float32", "shape": [2, 8], "onnx_shape": [2, 8]}
    ]
    assert report.extra["rank0"] == {"inputs": [], "outputs": []}
    assert report.op_precision == {"activation": {"fp16": 1}, "matmul": {"fp16": 1}}
    assert report.extra["package_bytes"] > 0 and "quantization" not in report.extra
    json.dumps(report.to_dict())


def test_fp32_report_has_no_casts(tmp_path: Path) -> None:
    path = save(_dense_block().model(), tmp_path)
    report = compile_coreml(path, ANE, tmp_path / "out", precision="fp32").report
    assert report.precision == "fp32"
    assert report.extra["casts_inserted"] == 0
    assert "cast" not in report.op_types_after


@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the report carries the compute plan")
def test_placement_is_left_to_the_device_off_macos(tmp_path: Path) -> None:
    report = compile_coreml(save(_dense_block().model(), tmp_path), ANE, tmp_path / "out").report
    assert report.placement == {}
    assert any("known only on the device" in note for note in report.notes)


def test_onnx_names_that_coreml_cannot_hold_are_mapped(tmp_path: Path) -> None:
    # PyTorch names tensors `input.1`, TensorFlow `out:0`: CoreML names hold no '.' or ':'
    g = Graph()
    x = g.input("input.1", [1, 4])
    g.nodes.append(onnx.helper.make_node("Relu", [x], ["out:0"]))
    g.output("out:0")
    model = g.model()
    path = save(model, tmp_path)
    report = compile_coreml(path, ANE, tmp_path / "out").report
    assert [(e["onnx_name"], e["name"]) for e in report.extra["inputs"]] == [("input.1", "input_1")]
    assert [(e["onnx_name"], e["name"]) for e in report.extra["outputs"]] == [("out:0", "out_0")]
    assert "input 'input.1' is named 'input_1' in the ML Program" in report.notes
    spec = ct.models.MLModel(str(tmp_path / "out" / "model.mlpackage"), skip_model_load=True).get_spec()
    assert [i.name for i in spec.description.input] == ["input_1"]
    assert list(predict_drift(path, {"input.1": np.ones((1, 4), np.float32)})) == ["out:0"]


@pytest.mark.parametrize(
    ("target", "units"),
    [
        ("coreml/all", "ALL"),
        ("coreml/ane", "CPU_AND_NE"),
        ("coreml/gpu", "CPU_AND_GPU"),
        ("coreml/cpu", "CPU_ONLY"),
    ],
)
def test_compute_units_follow_the_target(target: str, units: str, tmp_path: Path) -> None:
    artifact = compile_coreml(save(_dense_block().model(), tmp_path), Target.parse(target), tmp_path / "out")
    assert artifact.report.target == target
    assert artifact.report.extra["compute_units"] == units


def test_int64_inputs_become_int32_and_the_report_says_so(tmp_path: Path) -> None:
    report = compile_coreml(save(transformer_encoder(), tmp_path), ANE, tmp_path / "out").report
    assert report.extra["inputs"][0]["dtype"] == "int32"
    assert any("input_ids is int64 in ONNX and int32" in note for note in report.notes)
    # the Shape -> Gather -> Concat head-split subgraph folds away before lowering
    assert report.extra["folded"]["Shape"] == 1
    assert report.extra["onnx_nodes_after_folding"] < report.nodes_before


def test_mlpackage_is_taken_as_it_is(tmp_path: Path) -> None:
    model = _dense_block().model()
    path = save(model, tmp_path)
    first = compile_coreml(path, ANE, tmp_path / "a")
    again = compile_coreml(first.path, Target.parse("coreml/gpu"), tmp_path / "b")
    assert again.path == tmp_path / "b" / "model.mlpackage"
    assert again.sha256 == first.sha256
    assert again.report.op_types_after == first.report.op_types_after
    assert again.report.nodes_after == first.report.nodes_after
    assert again.report.precision == "fp16"
    assert any("taken as it is" in note for note in again.report.notes)

    feeds = random_feeds(model)
    from_package = predict_drift(first.path, feeds)
    from_onnx = predict_drift(path, feeds)
    output = model.graph.output[0].name
    np.testing.assert_array_equal(from_package[output], from_onnx[output])


@pytest.mark.macos
@macos_only
def test_fp16_prediction_is_close_to_coreml_on_this_mac(tmp_path: Path) -> None:
    model = _dense_block().model()
    path = save(model, tmp_path)
    artifact = compile_coreml(path, Target.parse("coreml/cpu"), tmp_path / "out")
    feeds = random_feeds(model)
    measured = ct.models.MLModel(str(artifact.path)).predict(feeds)
    predicted = predict_drift(path, feeds)
    for name, value in predicted.items():
        np.testing.assert_allclose(measured[name], value, rtol=1e-2, atol=1e-2)
    assert artifact.report.placement, "MLComputePlan gives a device for each op on macOS"
