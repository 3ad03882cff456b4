"""Apache TVM: an ONNX model imported by Relax's ONNX frontend, its operators fused and compiled
ahead of time by LLVM into one shared library (`model.so`) that TVM's Relax VM runs (`compile.py`)."""

from __future__ import annotations

from ondevice_farm.runtimes.spec import SOURCE_ONNX, BackendSpec, RuntimeSpec

#: the kernels beside the artifact: `model.so` -> `model.so.kernels.json` (each compiled kernel,
#: the ops it fused), read by the per-kernel profile to name what it times
KERNELS_SUFFIX = ".kernels.json"
#: how placements and per-kernel profiles name TVM's kernels: LLVM built them for the CPU
LLVM = "llvm"

SPEC = RuntimeSpec(
    name="tvm",
    title="TVM",
    backends=(
        BackendSpec(
            "cpu", LLVM, "TVM's own kernels, fused and compiled by LLVM for the CPU", accelerator=False
        ),
    ),
    # a checkpoint reaches TVM through the farm's ONNX export of it
    source=SOURCE_ONNX,
    compiler="ondevice_farm.runtimes.tvm.compile:compile_target",
    extra="tvm",
    fallback_kernels=(LLVM,),
    artifact_name="model.so",
    sidecar_suffixes=(KERNELS_SUFFIX,),
)
