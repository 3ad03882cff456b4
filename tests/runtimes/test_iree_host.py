"""IREE on the host: `farm compile` counts ONNX ops before and IREE's dispatches after, `farm submit`
measures iree/cpu and iree/vulkan for real against the host reference with a per-dispatch profile,
and what IREE refuses (an op, a shape it was not built for, a host without Vulkan) it refuses in
one line. iree/vulkan runs on Mesa's lavapipe where the host has no GPU (a software Vulkan)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="IREE targets need pip install 'ondevice-farm[iree]'")
iree_runtime = pytest.importorskip(
    "iree.runtime", reason="IREE targets need pip install 'ondevice-farm[iree]'"
)
onnx = pytest.importorskip("onnx")

from ondevice_farm_agents.runtimes import session_runtime  # noqa: E402
from ondevice_farm_agents.runtimes.spec import open_session  # noqa: E402

from ..core.conftest import farm, farm_json, farm_process  # noqa: E402

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)
SHAPE = "x=1x3x16x16"
WEIGHTS = {"w1": (8, 3, 3, 3), "b1": (8,), "w2": (16, 8, 3, 3), "b2": (16,), "w3": (10, 16), "b3": (10,)}


def _vulkan_devices() -> list[dict[str, Any]]:
    try:
        return list(iree_runtime.get_driver("vulkan").query_available_devices())
    except Exception:  # no loader, no ICD: no device
        return []


VULKAN = bool(_vulkan_devices())
needs_vulkan = pytest.mark.skipif(
    not VULKAN, reason="no Vulkan device here (Debian: apt-get install mesa-vulkan-drivers gives lavapipe)"
)
TARGETS = "ort/cpu,iree/cpu" + (",iree/vulkan" if VULKAN else "")


def save_cnn(path: Path) -> Path:
    """conv-relu-conv-relu-pool-flatten-gemm, batch dynamic (the farm pins it): 7 ONNX nodes."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weights(name: str, shape: tuple[int, ...]) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="pool"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [weights(name, shape) for name, shape in WEIGHTS.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def save_unpool(path: Path) -> Path:
    """A MaxUnpool: IREE's ONNX lowering makes it `torch.aten.max_unpool2d`, which it cannot compile."""
    from onnx import TensorProto, helper

    node = helper.make_node(
        "MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="unpool"
    )
    graph = helper.make_graph(
        [node],
        "unpool",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, 2, 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_cnn(tmp_path_factory.mktemp("iree") / "cnn.onnx")


@pytest.fixture(scope="module")
def compiled(cnn: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    home = tmp_path_factory.mktemp("compile") / "home"
    document = farm_json(home, "compile", str(cnn), "-t", "iree/cpu,iree/vulkan", "--shape", SHAPE)
    return {entry["target"]: entry for entry in document["targets"]}


def test_the_report_counts_dispatches_against_onnx_ops(compiled: dict[str, dict[str, Any]]) -> None:
    entry = compiled["iree/cpu"]
    report = entry["report"]
    assert report["nodes_before"] == 7 and report["op_types_before"]["Conv"] == 2
    # IREE fused 7 ONNX nodes into fewer dispatches, typed by IREE's name for each root op
    assert report["nodes_after"] == report["extra"]["dispatch_count"] < report["nodes_before"]
    assert report["op_types_after"]["conv"] == 2 and report["op_types_after"]["matmul"] == 1
    dispatches = {tuple(d["op_types"]) for d in report["extra"]["dispatches"]}
    assert ("Conv", "Relu") in dispatches and ("Gemm",) in dispatches  # the first conv took its ReLU
    assert report["extra"]["folded_nodes"] == ["flat"]  # a Flatten is a view: no dispatch
    assert report["notes"][0].startswith("IREE made 7 ONNX nodes 5 dispatches: ")
    assert report["placement"] == {"llvm-cpu": report["nodes_after"]} and report["precision"] == "fp32"
    extra = report["extra"]
    assert extra["converter_versions"]["iree-base-compiler"] == "3.13.0"
    assert extra["converter_versions"]["iree-base-runtime"] == "3.13.0"
    assert "--iree-hal-local-target-device-backends=llvm-cpu" in extra["iree_compile_flags"]
    assert extra["input_shapes"] == {"x": [1, 3, 16, 16]}  # the farm's shape, set before the import
    assert extra["conversion_s"] > 0 and extra["artifact_bytes"] > 5000
    artifact = Path(entry["artifact"])
    assert artifact.name == "model.vmfb" and artifact.stat().st_size == extra["artifact_bytes"]
    # beside it: the dispatches the profile names, the I/O map the agent orders inputs by
    assert json.loads(Path(f"{artifact}.dispatches.json").read_text()) == extra["dispatches"]
    assert Path(f"{artifact}.io.json").is_file()


def test_vulkan_is_spirv_for_the_android_baseline(compiled: dict[str, dict[str, Any]]) -> None:
    report = compiled["iree/vulkan"]["report"]
    assert "--iree-vulkan-target=vp_android_baseline_2022" in report["extra"]["iree_compile_flags"]
    assert report["placement"] == {"vulkan": report["nodes_after"]} and report["nodes_after"] < 7
    assert compiled["iree/vulkan"]["sha256"] != compiled["iree/cpu"]["sha256"]


@pytest.fixture(scope="module")
def submitted(cnn: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    home = tmp_path_factory.mktemp("submit") / "home"
    args = ["submit", str(cnn), "-d", "host-cpu", "-t", TARGETS, "--shape", SHAPE]
    done = farm_process(home, *args, "--runs", "8", "--repeats", "2", "--json", timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)
    jsonschema.validate(run, SCHEMA)  # the run document names iree/* targets as the schema allows
    return {job["target"]: job for job in run["jobs"]}


def test_every_target_is_measured_against_the_reference(submitted: dict[str, dict[str, Any]]) -> None:
    assert set(submitted) == set(TARGETS.split(","))
    for target, job in submitted.items():
        assert job["status"] == "ok", (target, job.get("error"))
        assert job["reference"]["passed"] is True, (target, job["reference"])
        assert job["reference"]["outputs"]["logits"]["max_abs"] < 1e-4, target
        assert len(job["latency_ms"]["samples"]) == 16, target  # 8 timed runs, twice: a fresh process
        assert job["load_ms"] > 0 and job["first_inference_ms"] > 0 and job["latency_ms"]["p50"] > 0
    assert submitted["iree/cpu"]["runner"].startswith("iree-runtime-python 3.13.0 local-sync")


def test_iree_cpu_profiles_each_dispatch(submitted: dict[str, dict[str, Any]]) -> None:
    job = submitted["iree/cpu"]
    ops = job["ops"]
    assert [op["name"] for op in ops] == [d["name"] for d in job["compile"]["extra"]["dispatches"]]
    assert {op["provider"] for op in ops} == {"llvm-cpu"} and {op["time_source"] for op in ops} == {
        "measured"
    }
    assert "Conv+Relu" in {op["op_type"] for op in ops}  # named by what the dispatch fused
    assert all(op["median_us"] > 0 and op["runs"] == 8 for op in ops)  # 1 + 8 calls, the first left out
    assert any("per-op profile: IREE's dispatches" in note for note in job["notes"])


@needs_vulkan
def test_iree_vulkan_runs_and_says_when_it_is_software(submitted: dict[str, dict[str, Any]]) -> None:
    job = submitted["iree/vulkan"]
    device = _vulkan_devices()[0]["name"]
    if "llvmpipe" in device:  # lavapipe's timings are a CPU's, and the job says so
        assert "software Vulkan on the CPU, not a GPU" in job["runner"]
        assert any(note.startswith("iree/vulkan ran on lavapipe") for note in job["notes"]), job["notes"]
    assert {op["provider"] for op in job["ops"]} == {"vulkan"} and len(job["ops"]) == 5


def test_an_op_iree_cannot_compile_is_one_line_naming_it(tmp_path: Path) -> None:
    model = save_unpool(tmp_path / "unpool.onnx")
    done = farm(tmp_path / "home", "compile", str(model), "-t", "iree/cpu,ort/cpu", "--json")
    assert done.exit_code == 5, done.stderr  # CompileError; ONNX Runtime compiled it all the same
    entries = {entry["target"]: entry for entry in json.loads(done.stdout)["targets"]}
    refusal = entries["iree/cpu"]["error"]
    assert "iree-compile refused the model at MaxUnpool (node unpool)" in refusal, refusal
    assert "max_unpool2d" in refusal and "\n" not in refusal and entries["iree/cpu"]["hint"]
    assert "report" in entries["ort/cpu"]


def test_a_shape_the_module_was_not_built_for_is_refused_in_one_line(
    compiled: dict[str, dict[str, Any]],
) -> None:
    runtime = session_runtime("iree")
    assert runtime is not None
    artifact = Path(compiled["iree/cpu"]["artifact"])
    session = open_session(runtime, "cpu", artifact, [np.zeros((2, 3, 16, 16), np.float32)], None)
    with pytest.raises(RuntimeError) as refused:
        session.infer()
    message = str(refused.value)
    assert "tensor shape dimension 0 mismatch; expected 1 but have 2" in message and "\n" not in message
    # the shape it was built for runs
    (logits,) = open_session(runtime, "cpu", artifact, [np.zeros((1, 3, 16, 16), np.float32)], None).infer()
    assert logits.shape == (1, 10)


def test_a_host_without_vulkan_refuses_iree_vulkan_in_one_line(cnn: Path, tmp_path: Path) -> None:
    # the Vulkan loader finds no driver: the host has no Vulkan device
    env = dict(os.environ, VK_ICD_FILENAMES=str(tmp_path / "no-driver.json"), VK_DRIVER_FILES="")
    args = ["submit", str(cnn), "-d", "host-cpu", "-t", "iree/vulkan", "--shape", SHAPE, "--no-profile"]
    done = farm_process(tmp_path / "home", *args, "--runs", "3", "--json", env=env, timeout_s=300)
    assert "Traceback" not in done.stderr
    run = json.loads(done.stdout)
    jsonschema.validate(run, SCHEMA)
    (job,) = run["jobs"]
    assert job["status"] == "failed"
    assert "no Vulkan device on this host" in job["error"] and "\n" not in job["error"], job["error"]


def test_a_missing_iree_says_how_to_install_it(
    cnn: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # import fails as if not installed, also where an earlier test of this process imported it
    for name in [m for m in sys.modules if m == "iree" or m.startswith("iree.")] + ["iree"]:
        monkeypatch.setitem(sys.modules, name, None)
    done = farm(tmp_path / "home", "compile", str(cnn), "-t", "iree/cpu", "--shape", SHAPE, "--json")
    assert done.exit_code == 2
    (entry,) = json.loads(done.stdout)["targets"]
    assert entry["hint"] == "pip install 'ondevice-farm[iree]'" and "\n" not in entry["error"]
