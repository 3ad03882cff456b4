"""IREE: an ONNX model imported into MLIR by IREE's ONNX importer and compiled ahead of time by
`iree-compile` into one `.vmfb` module of dispatches (`compile.py`), which IREE's runtime runs:
on the CPU (llvm-cpu) or on a Vulkan device (SPIR-V), the GPU path Android phones take."""

from __future__ import annotations

from ondevice_farm.runtimes.spec import SOURCE_ONNX, BackendSpec, RuntimeSpec

#: the dispatches beside the artifact: `model.vmfb` -> `model.vmfb.dispatches.json` (each dispatch,
#: the ONNX nodes it fused), read by the per-dispatch profile to name what it times
DISPATCHES_SUFFIX = ".dispatches.json"
#: how placements and per-dispatch profiles name where IREE's dispatches run
LLVM_CPU = "llvm-cpu"
VULKAN = "vulkan"

SPEC = RuntimeSpec(
    name="iree",
    title="IREE",
    backends=(
        BackendSpec("cpu", LLVM_CPU, "IREE's dispatches compiled by LLVM for the CPU", accelerator=False),
        # on a host without a GPU the Vulkan device is Mesa's lavapipe: software Vulkan on the CPU
        BackendSpec(
            "vulkan",
            VULKAN,
            "IREE's dispatches as SPIR-V on a Vulkan device (a phone's GPU; lavapipe's software "
            "Vulkan on a host without one)",
        ),
    ),
    # a checkpoint reaches IREE through the farm's ONNX export of it
    source=SOURCE_ONNX,
    compiler="ondevice_farm.runtimes.iree.compile:compile_target",
    extra="iree",
    # a module built for one device runs every dispatch there; a dispatch on the CPU's backend in
    # an accelerator's job would be one the accelerator left
    fallback_kernels=(LLVM_CPU,),
    artifact_name="model.vmfb",
    sidecar_suffixes=(DISPATCHES_SUFFIX,),
)
