"""ORT's own session log, as recorded on GPU machines (fixtures/README.md) and as printed here."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort

from ondevice_farm.analysis.ort_log import CopyInsertion, parse_session_log, provider_load_failure
from ondevice_farm_agents.host.native_log import captured_native_log

FIXTURES = Path(__file__).parent / "fixtures"
CUDA = "CUDAExecutionProvider"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_copies_around_cpu_resize_nodes_in_a_cuda_session() -> None:
    log = parse_session_log(read("yolo11n_cuda_memcpy_insertion.log"))
    assert log.copies == [
        CopyInsertion("MemcpyFromHost", "/model.11/Resize_output_0", CUDA),
        CopyInsertion("MemcpyFromHost", "/model.14/Resize_output_0", CUDA),
        CopyInsertion("MemcpyToHost", "/model.10/cv2/act/Mul_output_0", CUDA),
        CopyInsertion("MemcpyToHost", "/model.13/cv2/act/Mul_output_0", CUDA),
    ]
    # ORT's own count of the copies it added agrees with the lines read one by one
    assert log.copy_counts == {("main_graph", CUDA): len(log.copies)}


def test_nodes_without_a_cuda_kernel_are_named_with_their_op_type() -> None:
    shape = parse_session_log(read("shape_opset21_cuda_kernel_not_found.log"))
    assert [(m.op_type, m.node) for m in shape.missing_kernels] == [
        ("Shape", "index_Tensor_n0_rk1"),
        ("Shape", "sym_size_int3"),
        ("Squeeze", "sym_size_int4"),
        ("Unsqueeze", "ShapeBasedReshapeIsSqueezePattern--reshape"),
        ("Shape", "sym_size_int5"),
        ("Shape", "sym_size_int"),
    ]
    quantized = parse_session_log(read("qlinearconv_cuda_kernel_not_found.log"))
    assert {m.provider for m in quantized.missing_kernels} == {CUDA}
    assert [m.node for m in quantized.missing_kernels][:2] == ["fused Conv_60_quant", "fused Conv_62_quant"]
    assert sorted({m.op_type for m in quantized.missing_kernels}) == ["QLinearAdd", "QLinearConv"]


def test_nodes_ort_keeps_on_the_cpu_by_choice() -> None:
    log = parse_session_log(read("ros_cuda_force_cpu_fallback.log"))
    assert log.cpu_preferred == ["1172", "1173", "1162", "1158", "1179", "531", "640", "528"]
    assert log.missing_kernels == []


def test_placement_summary_of_a_split_cuda_graph() -> None:
    log = parse_session_log(read("sherpa_streaming_cuda_node_placements.log"))
    assert log.placement_counts == {"CPUExecutionProvider": 875, CUDA: 2426}
    assert log.partitioned
    # the poster elided the per-node lines: nothing is invented for them
    assert log.nodes_on(CUDA) == [] and log.nodes_on("CPUExecutionProvider") == []


def test_per_node_placement_listing_with_a_copy_node() -> None:
    log = parse_session_log(read("migraphx_node_placements_with_memcpy.log"))
    accelerator = "MIGraphXExecutionProvider"
    assert log.placement_counts == {accelerator: 2, "CPUExecutionProvider": 39}
    assert ("MemcpyFromHost", "Memcpy") in log.nodes_on(accelerator)
    assert log.nodes_on("CPUExecutionProvider") == [("Gather", "Gather_1067")]


def test_why_the_cuda_provider_did_not_load() -> None:
    linux = provider_load_failure(read("cuda_provider_load_failure_linux_ort1.16.log"))
    assert linux is not None and "libcublasLt.so.11: cannot open shared object file" in linux
    windows = provider_load_failure(read("cuda_provider_load_failure_windows_pr21425.log"))
    assert windows is not None
    assert "LoadLibrary failed with error 126" in windows and "Require cuDNN 9.* and CUDA 12.*" in windows
    assert provider_load_failure(read("yolo11n_cuda_memcpy_insertion.log")) is None


def test_the_same_reader_on_a_verbose_log_printed_here() -> None:
    """A real session on this machine, its log captured from fd 2 as the probe does it."""
    options = ort.SessionOptions()
    options.log_severity_level = 0
    model = Path(__file__).parents[2] / "examples" / "tinynet.onnx"
    with captured_native_log() as captured:
        ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    log = parse_session_log(captured.text)
    assert list(log.placement_counts) == ["CPUExecutionProvider"]
    assert log.placement_counts["CPUExecutionProvider"] > 0
    assert not log.partitioned and log.copies == []
