"""CoreML: an `.mlpackage` built by the farm's own ONNX -> MIL lowering (`compile/`), or by
coremltools' PyTorch frontend on the checkpoint (the `torch` route, `coreml-torch/*`)."""

from __future__ import annotations

from ondevice_farm.runtimes.spec import SOURCE_CHECKPOINT, SOURCE_ONNX, BackendSpec, RouteSpec, RuntimeSpec

SPEC = RuntimeSpec(
    name="coreml",
    title="CoreML",
    backends=(
        BackendSpec("all", "ALL", "CoreML's choice among the Neural Engine, the GPU and the CPU"),
        BackendSpec("ane", "CPU_AND_NE", "the Neural Engine, the CPU for what it cannot take"),
        BackendSpec("gpu", "CPU_AND_GPU", "the GPU (Metal), the CPU for what it cannot take"),
        BackendSpec("cpu", "CPU_ONLY", "the CPU only", accelerator=False),
    ),
    source=SOURCE_ONNX,
    compiler="ondevice_farm.runtimes.coreml.compiler:compile_target",
    extra="coreml",
    routes=(
        RouteSpec(
            "torch",
            SOURCE_CHECKPOINT,
            "ondevice_farm.runtimes.coreml.compiler:compile_torch_target",
            "coremltools' PyTorch frontend on the checkpoint",
        ),
    ),
    fallback_kernels=("CPU",),
)
