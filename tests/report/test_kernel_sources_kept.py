"""The slowest-kernels table names each kernel's source nodes; the source graph is read with onnx
once per model and kept beside it in the artifact store, so that the next report (a submit
through a running `farm serve`) does not import onnx again."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from ondevice_farm.artifacts import sha256_file
from ondevice_farm.reports.kernel_sources import NODES_FILE, kernel_sources_of
from tests.report.crafted import job, run

CPU = "CPUExecutionProvider"


def _stored_model(artifacts: Path) -> str:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node("Sigmoid", ["h"], ["y"], name="sig"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    staging = artifacts / "staging.onnx"
    artifacts.mkdir(parents=True)
    onnx.save(model, staging)
    sha = sha256_file(staging)
    (artifacts / sha[:2] / sha).mkdir(parents=True)
    staging.rename(artifacts / sha[:2] / sha / "m.onnx")
    return sha


def test_the_source_graph_is_kept_and_read_back_without_the_model(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    sha = _stored_model(artifacts)
    document = run(job("host-cpu", "ort/cpu", ops=[("relu", "Relu", CPU, 5.0), ("sig", "Sigmoid", CPU, 3.0)]))
    document["model"] = {"name": "m", "sha256": sha}
    first = kernel_sources_of(document, artifacts)
    assert first == {0: {"relu": ["relu"], "sig": ["sig"]}}
    assert (artifacts / sha[:2] / sha / NODES_FILE).is_file()
    (artifacts / sha[:2] / sha / "m.onnx").unlink()  # only the kept graph is left to read
    assert kernel_sources_of(document, artifacts) == first
