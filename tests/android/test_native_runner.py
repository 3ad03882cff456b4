"""The native runner's contract, run directly on this host against the wheel's libonnxruntime.

What it writes is what the Android agent reads: result.json, outputs/<i>.npy, profile.json, or
error.json and a non-zero exit. Outputs are compared with the host's onnxruntime on the same inputs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ondevice_farm.analysis.profile_runs import profiled_runs
from ondevice_farm_agents.android.native_build import RunnerBuild

Model = tuple[Path, str, dict[str, np.ndarray]]


def _run(runner: RunnerBuild, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(runner.binary), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _inputs(tmp_path: Path, inputs: dict[str, np.ndarray]) -> list[str]:
    args = []
    for index, (name, array) in enumerate(inputs.items()):
        path = tmp_path / f"in_{index}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    return args


def test_result_outputs_and_profile_follow_the_contract(
    native_runner: RunnerBuild, small_model: Model, tmp_path: Path
) -> None:
    model, _, inputs = small_model
    out = tmp_path / "out"
    args = ["--model", str(model), *_inputs(tmp_path, inputs), "--warmup", "2", "--runs", "7"]
    done = _run(native_runner, out, *args, "--profile-runs", "3")
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "result.json").read_text())
    assert len(result["samples_ms"]) == 7 and all(s > 0 for s in result["samples_ms"])
    assert result["load_ms"] > 0 and result["first_inference_ms"] > 0 and result["warmup_runs"] == 2
    assert result["warmup_total_ms"] > 0
    assert result["ort_version"] == ort.__version__ and result["ort_build_type"] == "Release"
    assert result["runner_build_type"] == "Release" and result["execution_provider"] == "cpu"
    assert result["peak_memory_bytes"] > 0 and "VmHWM" in result["peak_memory_kind"]
    (output,) = result["outputs"]
    assert output == {"name": "y", "file": "outputs/0.npy", "dtype": "<f4", "shape": [2, 4]}
    (expected,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(["y"], inputs)
    np.testing.assert_array_equal(np.load(out / output["file"], allow_pickle=False), expected)
    events = json.loads((out / "profile.json").read_text())
    runs = profiled_runs(events)
    assert len(runs) == 3 and all(run.nodes for run in runs)
    assert {e["args"]["provider"] for run in runs for e in run.nodes} == {"CPUExecutionProvider"}
    assert not (out / "error.json").exists()


def test_integer_bool_and_half_tensors_round_trip_through_npy(
    native_runner: RunnerBuild, tmp_path: Path
) -> None:
    kinds = {
        "i": (TensorProto.INT64, np.int64),
        "b": (TensorProto.BOOL, np.bool_),
        "h": (TensorProto.FLOAT16, np.float16),
    }
    graph = helper.make_graph(
        [helper.make_node("Identity", [k], [f"{k}_out"], name=f"id_{k}") for k in kinds],
        "kinds",
        [helper.make_tensor_value_info(k, t, [3, 2]) for k, (t, _) in kinds.items()],
        [helper.make_tensor_value_info(f"{k}_out", t, [3, 2]) for k, (t, _) in kinds.items()],
    )
    model = tmp_path / "kinds.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), model)
    rng = np.random.default_rng(3)
    inputs: dict[str, np.ndarray] = {
        k: (rng.standard_normal((3, 2)) * 9).astype(d) for k, (_, d) in kinds.items()
    }
    done = _run(
        native_runner, tmp_path / "out", "--model", str(model), *_inputs(tmp_path, inputs), "--runs", "1"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out/result.json").read_text())
    for entry in result["outputs"]:
        got = np.load(tmp_path / "out" / entry["file"], allow_pickle=False)
        np.testing.assert_array_equal(got, inputs[entry["name"].removesuffix("_out")])
        assert got.dtype == inputs[entry["name"].removesuffix("_out")].dtype


@pytest.mark.parametrize(
    ("args", "stage", "reason"),
    [
        (["--ep", "xnnpack"], "load", "XNNPACK execution provider is not supported in this build"),
        (["--ep", "nnapi"], "load", "NNAPI is compiled in only in the Android build"),
        (
            ["--ep", "qnn", "--ep-option", "backend_path=libQnnHtp.so"],
            "load",
            "QNN execution provider is not",
        ),
        (["--ep", "cpu", "--ep-option", "x=1"], "load", "takes no provider options"),
        (
            ["--ep", "qnn", "--ep-library", "/nonexistent/libonnxruntime_providers_qnn.so"],
            "load",
            "registering",
        ),
    ],
)
def test_providers_this_build_lacks_fail_clearly(
    native_runner: RunnerBuild, small_model: Model, tmp_path: Path, args: list[str], stage: str, reason: str
) -> None:
    model, _, inputs = small_model
    out = tmp_path / "out"
    done = _run(native_runner, out, "--model", str(model), *_inputs(tmp_path, inputs), *args)
    assert done.returncode == 1
    error = json.loads((out / "error.json").read_text())
    assert error["stage"] == stage and reason in error["error"]
    assert not (out / "result.json").exists() and not (out / "outputs").exists()


def test_a_broken_model_or_a_missing_input_writes_error_json_and_nothing_else(
    native_runner: RunnerBuild, small_model: Model, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(small_model[0].read_bytes()[:50])
    done = _run(native_runner, tmp_path / "a", "--model", str(broken), *_inputs(tmp_path, small_model[2]))
    assert done.returncode == 1 and "load" in done.stderr
    assert json.loads((tmp_path / "a/error.json").read_text())["stage"] == "load"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["error.json"]
    done = _run(native_runner, tmp_path / "b", "--model", str(small_model[0]))
    error = json.loads((tmp_path / "b/error.json").read_text())
    assert error == {"stage": "inputs", "error": "no --input for graph input 'x'"}
    usage = _run(native_runner, tmp_path / "c", "--runs", "many")
    assert usage.returncode == 2 and "--runs takes a count" in usage.stderr


def test_version_names_the_runner_and_the_library(native_runner: RunnerBuild) -> None:
    done = subprocess.run(
        [str(native_runner.binary), "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("farm_native_runner ") and f"onnxruntime {ort.__version__}" in done.stdout
