"""`host-cuda` through the host agent: absent with its reason here, measured for real on a GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ondevice_farm.errors import UsageError
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from ondevice_farm_agents.host.cuda import CudaOptions, cuda_availability

CUDA_HERE = cuda_availability()
needs_gpu = pytest.mark.skipif(not CUDA_HERE.available, reason=f"no usable GPU: {CUDA_HERE.reason}")
CUDA_TARGET = Target("ort", "cuda")


def agent(extra: dict[str, str] | None = None) -> HostAgent:
    return HostAgent(AgentSettings(profiles=load_profiles(), extra=extra or {}))


def test_host_cpu_is_listed_whatever_the_gpu() -> None:
    host = agent()
    units = host.discover()
    assert [u.profile for u in units if u.properties["device"] == "cpu"] == ["host-cpu"]
    assert [u.profile for u in units if u.properties["device"] == "cuda"] == (
        ["host-cuda"] if CUDA_HERE.available else []
    )


@pytest.mark.skipif(CUDA_HERE.available, reason="this machine has a usable GPU")
def test_host_cuda_is_reported_absent_with_a_reason_a_user_can_act_on() -> None:
    host = agent()
    host.discover()
    [line] = host.absences()
    assert line.startswith("host-cuda: absent (")
    assert "CUDAExecutionProvider" in line
    assert "ondevice-farm[cuda]" in line or "cannot start" in line or "pip uninstall" in line


@pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="onnxruntime-gpu is installed here"
)
def test_a_cuda_job_without_the_provider_fails_with_the_install_hint(tmp_path: Path) -> None:
    model = celu_between_matmuls(tmp_path)
    request = RunRequest(artifact=model, artifact_sha256="x", target=CUDA_TARGET, inputs=inputs(), runs=2)
    host = agent()
    with pytest.raises(UsageError) as caught:
        host.run(host.discover()[0], request)
    assert "CUDAExecutionProvider" in caught.value.message


def test_cuda_settings_come_from_the_agent_settings() -> None:
    options = CudaOptions.from_extra({"cuda_device_id": "1", "cuda_use_tf32": "0", "cuda_io_binding": "yes"})
    assert options == CudaOptions(device_id=1, use_tf32=False, io_binding=True)
    assert options.provider_options() == {"device_id": "1", "use_tf32": "0"}
    assert CudaOptions.from_extra({}) == CudaOptions(device_id=0, use_tf32=True, io_binding=False)


def celu_between_matmuls(directory: Path) -> Path:
    """MatMul -> Celu -> MatMul: ORT's CUDA provider has no Celu kernel (docs/OperatorKernels.md)."""
    rng = np.random.default_rng(0)
    w1, w2 = (
        helper.make_tensor(name, TensorProto.FLOAT, [64, 64], rng.standard_normal(64 * 64).astype(np.float32))
        for name in ("w1", "w2")
    )
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Celu", ["h1"], ["h2"], name="celu"),
        helper.make_node("MatMul", ["h2", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "celu_fallback",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])],
        initializer=[w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = directory / "celu_fallback.onnx"
    onnx.save(model, str(path))
    return path


def inputs() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)}


@needs_gpu
@pytest.mark.parametrize("io_binding", ["0", "1"])
def test_a_split_graph_on_the_gpu_shows_its_fallback_and_copies(tmp_path: Path, io_binding: str) -> None:
    model = celu_between_matmuls(tmp_path)
    request = RunRequest(artifact=model, artifact_sha256="x", target=CUDA_TARGET, inputs=inputs(), runs=5)
    host = agent({"cuda_io_binding": io_binding})
    unit = next(u for u in host.discover() if u.profile == "host-cuda")
    run = host.run(unit, request)
    assert run.placement["celu"] == "CPUExecutionProvider"
    assert run.placement["mm1"] == "CUDAExecutionProvider"
    assert {op.op_type for op in run.ops} >= {"MemcpyToHost", "MemcpyFromHost"}
    assert any(n.startswith("transfers: 2 copy node(s)") for n in run.notes), run.notes
    assert any("ORT refused the session" in n and "Celu celu" in n for n in run.notes), run.notes
    assert any(("IO binding on" in n) == (io_binding == "1") for n in run.notes if n.startswith("latency:"))
    assert run.outputs["y"].shape == (8, 64) and len(run.samples_ms) == 5
    assert run.warm_load_ms is not None and run.warm_load_ms > 0
    assert run.warm_load_method == "second session in the same process"
