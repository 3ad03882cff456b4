"""TVM on the host: `tvm/cpu` compiled from ONNX by Relax's frontend and TVM's fusing pipeline,
measured for real beside ONNX Runtime against the host reference, its kernels profiled by the VM's
instrument; what it refuses, in one line."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ondevice_farm.targets import Target
from ondevice_farm_agents.runtimes import session_runtime
from ondevice_farm_agents.runtimes.spec import open_session

from ..core.conftest import farm, farm_json, farm_process

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tvm") is None,
    reason="TVM tests need apache-tvm: pip install 'ondevice-farm[tvm]'",
)
SHAPE = (1, 3, 16, 16)
#: ELF's e_machine of 64-bit Arm
EM_AARCH64 = 183


def save_cnn(path: Path) -> Path:
    """Two Conv+Relu, a global pool and a Gemm: TVM fuses each Conv with its bias add and Relu,
    and the Gemm with its bias add."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> Any:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    weights = [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3), weight("b2", 8)]
    weights += [weight("wf", 10, 8), weight("bf", 10)]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_cnn(tmp_path_factory.mktemp("tvm") / "cnn.onnx")


@pytest.fixture(scope="module")
def compiled(cnn: Path) -> dict[str, Any]:
    document = farm_json(cnn.parent / "home", "compile", str(cnn), "-t", "tvm/cpu")
    (entry,) = document["targets"]
    assert "error" not in entry, entry
    return dict(entry)


def test_the_report_names_the_kernels_fusion_left(compiled: dict[str, Any]) -> None:
    report = compiled["report"]
    extra = report["extra"]
    # the ONNX graph's 7 nodes; after fusion 4 kernels: 2 Conv+bias+Relu, the pool's mean, Gemm+bias
    assert report["op_types_before"] == {
        "Conv": 2,
        "Relu": 2,
        "GlobalAveragePool": 1,
        "Flatten": 1,
        "Gemm": 1,
    }
    assert report["op_types_after"] == {"fused_conv2d_add_relu": 2, "mean": 1, "fused_matmul_add": 1}
    assert extra["kernels_after_fusion"] == 4 < extra["kernels_before_fusion"] == 9
    assert extra["fused"] == {"conv2d + add + relu": 2, "matmul + add": 1}
    appeared = {f["op_type"] for f in report["fusions"] if f["before"] == 0}
    assert appeared == {"fused_conv2d_add_relu", "fused_matmul_add"}  # a kernel of one op is no fusion
    assert "get_default_pipeline" in extra["pipeline"] and "no operator fusion" in extra["pipeline_reason"]
    assert extra["converter_versions"]["apache-tvm"] == "0.27.0.post1"
    assert extra["converter_versions"]["apache-tvm-ffi"] == "0.1.15.post2"
    assert report["precision"] == "fp32" and report["op_precision"]["conv"] == {"fp32": 2}
    assert report["placement"] == {"llvm": 4} and report["fallback_ops"] == []
    artifact = Path(compiled["artifact"])
    assert artifact.name == "model.so" and extra["artifact_bytes"] == artifact.stat().st_size > 10_000
    assert extra["conversion_s"] > 0 and extra["tvm_target"]["kind"] == "llvm"
    # the kernels beside the artifact, for the profile to name what it times
    kernels = json.loads(Path(f"{artifact}.kernels.json").read_text())
    assert [k["name"] for k in kernels] == list(report["node_placement"])


def test_an_op_the_frontend_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Det", ["r"], ["y"])],
        "det",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = tmp_path / "det.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    done = farm(tmp_path / "home", "compile", str(model), "-t", "tvm/cpu,ort/cpu", "--json")
    assert done.exit_code == 5, done.stderr  # CompileError; ONNX Runtime compiled all the same
    entries = {entry["target"]: entry for entry in json.loads(done.stdout)["targets"]}
    refusal = entries["tvm/cpu"]["error"]
    assert refusal == "TVM's Relax ONNX frontend refused the model at Det: has no converter for it"
    assert "ort/cpu" in entries["tvm/cpu"]["hint"] and "report" in entries["ort/cpu"]


def test_a_shape_the_library_was_not_built_for_is_refused_in_one_line(
    compiled: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TVM_NUM_THREADS", "1")  # the session sets it: put back after the test
    runtime = session_runtime("tvm")
    assert runtime is not None
    artifact = Path(compiled["artifact"])
    built_for = np.zeros(SHAPE, np.float32)
    assert open_session(runtime, "cpu", artifact, [built_for], 1).infer()[0].shape == (1, 10)
    batch_of_two = np.zeros((2, *SHAPE[1:]), np.float32)
    with pytest.raises(ValueError) as refused:
        open_session(runtime, "cpu", artifact, [batch_of_two], 1).infer()
    message = str(refused.value)
    assert "\n" not in message and message.startswith("TVM refused the inputs")
    assert "match_cast error" in message and "shape[0] mismatch" in message


def test_a_checkpoint_reaches_tvm_through_its_onnx_export(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]'")
    from ..torch_source.architectures import save_exported

    checkpoint = save_exported("encoder", tmp_path / "encoder.pt2")
    (entry,) = farm_json(tmp_path / "home", "compile", str(checkpoint), "-t", "tvm/cpu")["targets"]
    extra = entry["report"]["extra"]
    assert extra["source"] == "the ONNX export of the PyTorch checkpoint"
    assert extra["kernels_after_fusion"] < extra["kernels_before_fusion"]
    # the MLP's up-projection, its bias and the whole GELU (erf form) in one kernel
    assert extra["fused"]["matmul + add + divide + erf + add + multiply + multiply"] == 1


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None, reason="needs g++-aarch64-linux-gnu")
def test_the_aarch64_build_is_a_phone_library(cnn: Path, tmp_path: Path) -> None:
    from ondevice_farm.runtimes.tvm.compile import compile_tvm
    from ondevice_farm.runtimes.tvm.machines import AARCH64_LINUX

    built = compile_tvm(cnn, Target.parse("tvm/cpu"), tmp_path, {"x": SHAPE}, machine=AARCH64_LINUX)
    header = built.path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == EM_AARCH64
    extra = built.report.extra
    assert extra["tvm_target"]["mtriple"] == "aarch64-linux-gnu" and extra["machine"] == "aarch64-linux"
    assert extra["kernels_after_fusion"] == 4  # the same fusion as the host's build


@pytest.fixture(scope="module")
def submitted(cnn: Path) -> dict[str, Any]:
    done = farm_process(
        cnn.parent / "submit-home",
        "submit",
        str(cnn),
        "-d",
        "host-cpu",
        "-t",
        "ort/cpu,tvm/cpu",
        "--runs",
        "8",
        "--repeats",
        "2",
        "--json",
        timeout_s=600,
    )
    assert done.returncode == 0, done.stderr
    run: dict[str, Any] = json.loads(done.stdout)
    return {job["target"]: job for job in run["jobs"]}


def test_tvm_is_measured_beside_ort_against_the_reference(submitted: dict[str, Any]) -> None:
    assert set(submitted) == {"ort/cpu", "tvm/cpu"}
    for target, job in submitted.items():
        assert job["status"] == "ok", (target, job.get("error"))
        reference = job["reference"]
        assert reference["passed"] is True, (target, reference)
        assert reference["tolerance"]["precision"] == "fp32"
        assert reference["outputs"]["y"]["max_abs"] < 1e-4
        # two sessions of 8 timed runs each: the second in a fresh process
        assert len(job["latency_ms"]["samples"]) == 16, target
        assert (
            job["load_ms"] > 0
            and job["first_inference_ms"] > 0
            and job["provenance"]["latency"] == "measured"
        )
    assert submitted["tvm/cpu"]["runner"].startswith("apache-tvm-python 0.27.0.post1")


def test_tvm_profiles_its_kernels(submitted: dict[str, Any]) -> None:
    job = submitted["tvm/cpu"]
    ops = job["ops"]
    # every kernel the compile reported, in its order, timed by the VM's instrument
    assert [op["name"] for op in ops] == list(job["compile"]["node_placement"])
    assert [op["op_type"] for op in ops] == [k["op_type"] for k in job["compile"]["extra"]["kernels"]]
    assert {op["provider"] for op in ops} == {"llvm"} and {op["time_source"] for op in ops} == {"measured"}
    assert all(op["median_us"] > 0 and op["runs"] == 8 for op in ops)
    assert any("Relax VM's instrument" in note for note in job["notes"])
