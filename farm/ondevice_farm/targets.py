"""Targets: a runtime and a backend, written `runtime/backend` (e.g. `ort/nnapi`).

A CoreML target may also name the converter that builds it: `coreml/ane` is the farm's own
ONNX -> MIL lowering, `coreml-torch/ane` is coremltools' PyTorch frontend on a PyTorch
checkpoint (docs/pytorch.md). Both run on the same devices with the same compute units.

ExecuTorch (`executorch/*`) and LiteRT (`litert/*`) targets are compiled from a PyTorch
checkpoint only: their converters read the program, not its ONNX export.
"""

from __future__ import annotations

from dataclasses import dataclass

from ondevice_farm.errors import UsageError

#: ONNX Runtime backend -> the execution provider it asks for (CPU is always appended)
ORT_PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "nnapi": "NnapiExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "cuda": "CUDAExecutionProvider",
}

#: CoreML backend -> MLComputeUnits name
COREML_COMPUTE_UNITS: dict[str, str] = {
    "all": "ALL",
    "ane": "CPU_AND_NE",
    "gpu": "CPU_AND_GPU",
    "cpu": "CPU_ONLY",
}

#: ExecuTorch backend -> the partitioner that lowers to its delegate ("" for none: portable kernels)
EXECUTORCH_PARTITIONERS: dict[str, str] = {"xnnpack": "XnnpackPartitioner", "portable": ""}

#: LiteRT backend -> the delegate the interpreter applies ("" for none: builtin kernels)
LITERT_DELEGATES: dict[str, str] = {"xnnpack": "XNNPACK", "cpu": ""}

#: runtimes whose converters take the PyTorch checkpoint itself (no ONNX)
CHECKPOINT_RUNTIMES = ("executorch", "litert")

#: route -> what builds the artifact; a target without a route is built from ONNX
ROUTES: dict[str, str] = {"torch": "coremltools' PyTorch frontend on the checkpoint"}

KNOWN_TARGETS: tuple[str, ...] = tuple(
    [f"ort/{b}" for b in ORT_PROVIDERS]
    + [f"coreml/{b}" for b in COREML_COMPUTE_UNITS]
    + [f"coreml-torch/{b}" for b in COREML_COMPUTE_UNITS]
    + [f"executorch/{b}" for b in EXECUTORCH_PARTITIONERS]
    + [f"litert/{b}" for b in LITERT_DELEGATES]
)


@dataclass(frozen=True, order=True)
class Target:
    runtime: str
    backend: str
    #: "" for the ONNX route; "torch" where coremltools converts the PyTorch checkpoint itself
    route: str = ""

    @classmethod
    def parse(cls, text: str) -> Target:
        name = text.strip().lower()
        if name not in KNOWN_TARGETS:
            raise UsageError(f"unknown target {text!r}; known targets: {', '.join(KNOWN_TARGETS)}")
        runtime, backend = name.split("/", 1)
        runtime, _, route = runtime.partition("-")
        return cls(runtime, backend, route)

    @property
    def name(self) -> str:
        prefix = f"{self.runtime}-{self.route}" if self.route else self.runtime
        return f"{prefix}/{self.backend}"

    @property
    def on_device(self) -> Target:
        """The target as a device profile lists it: the route changes the artifact, not where it runs."""
        return Target(self.runtime, self.backend)

    def with_route(self, route: str) -> Target:
        return Target(self.runtime, self.backend, route)

    @property
    def is_accelerator(self) -> bool:
        """True where ops that land on the CPU count as fallbacks (for ExecuTorch and LiteRT: ops
        their delegate left to portable or builtin kernels)."""
        return self.backend not in ("cpu", "portable")

    @property
    def needs_checkpoint(self) -> bool:
        """True where the converter reads a PyTorch checkpoint, not an ONNX model."""
        return self.route == "torch" or self.runtime in CHECKPOINT_RUNTIMES

    def ort_providers(self) -> list[str]:
        if self.runtime != "ort":
            raise UsageError(f"{self.name} is not an ONNX Runtime target")
        primary = ORT_PROVIDERS[self.backend]
        return [primary] if primary == "CPUExecutionProvider" else [primary, "CPUExecutionProvider"]

    def __str__(self) -> str:
        return self.name


def parse_targets(text: str | None) -> list[Target] | None:
    """`ort/cpu,coreml/ane` -> targets; None or empty means "the profile's own"."""
    if not text:
        return None
    return [Target.parse(part) for part in text.split(",") if part.strip()]


def with_torch_routes(targets: list[Target]) -> list[Target]:
    """Each ONNX-route CoreML target followed by its `coreml-torch` twin (from a PyTorch source)."""
    out: list[Target] = []
    for target in targets:
        out.append(target)
        twin = target.with_route("torch")
        if target.runtime == "coreml" and not target.route and twin not in targets:
            out.append(twin)
    return out
