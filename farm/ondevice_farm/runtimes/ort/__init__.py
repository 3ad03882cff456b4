"""ONNX Runtime: an ONNX model optimised for the target's execution provider
(`compile.py`, its cache `cache.py`); ONNX Runtime GenAI folders run on its `ort/*` targets."""

from __future__ import annotations

from ondevice_farm.runtimes.spec import SOURCE_FOLDER, SOURCE_ONNX, BackendSpec, RuntimeSpec

#: where the providers leave what they cannot take (always appended to the session's providers)
CPU_PROVIDER = "CPUExecutionProvider"

SPEC = RuntimeSpec(
    name="ort",
    title="ONNX Runtime",
    backends=(
        BackendSpec("cpu", CPU_PROVIDER, "ONNX Runtime's own CPU kernels (MLAS)", accelerator=False),
        BackendSpec("xnnpack", "XnnpackExecutionProvider", "XNNPACK's CPU kernels for the ops it takes"),
        # NNAPI drivers and QNN's HTP relax fp32 to fp16
        BackendSpec(
            "nnapi",
            "NnapiExecutionProvider",
            "Android NNAPI: the phone's NPU, GPU or DSP driver",
            True,
            "fp16",
        ),
        BackendSpec("qnn", "QNNExecutionProvider", "Qualcomm QNN: the Hexagon NPU", True, "fp16"),
        # the CUDA provider's default use_tf32=1 rounds MatMul/Conv inputs to a 10-bit mantissa
        BackendSpec("cuda", "CUDAExecutionProvider", "an NVIDIA GPU through CUDA", True, "tf32"),
    ),
    source=SOURCE_ONNX,
    extra_sources=(SOURCE_FOLDER,),
    compiler="ondevice_farm.runtimes.ort.compiler:compile_target",
    extra="",
    fallback_kernels=(CPU_PROVIDER,),
    artifact_name="model.onnx",
)
