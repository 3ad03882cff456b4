"""LiteRT: the PyTorch checkpoint converted to a `.tflite` flatbuffer (`compile.py`); the
backend is the interpreter's choice at load (XNNPACK's delegate, or builtin kernels only)."""

from __future__ import annotations

from ondevice_farm.runtimes.spec import SOURCE_CHECKPOINT, BackendSpec, RuntimeSpec

SPEC = RuntimeSpec(
    name="litert",
    title="LiteRT",
    backends=(
        BackendSpec("xnnpack", "XNNPACK", "the interpreter's XNNPACK delegate, builtin kernels for the rest"),
        BackendSpec("cpu", "", "LiteRT's builtin kernels only", accelerator=False),
    ),
    source=SOURCE_CHECKPOINT,
    compiler="ondevice_farm.runtimes.litert.compile:compile_target",
    extra="litert",
    fallback_kernels=("builtin",),
    artifact_name="model.tflite",
)
