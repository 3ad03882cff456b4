"""Targets: a runtime and a backend, written `runtime/backend` (e.g. `ort/nnapi`)."""

from __future__ import annotations

from dataclasses import dataclass

from farm.errors import UsageError

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

KNOWN_TARGETS: tuple[str, ...] = tuple(
    [f"ort/{b}" for b in ORT_PROVIDERS] + [f"coreml/{b}" for b in COREML_COMPUTE_UNITS]
)


@dataclass(frozen=True, order=True)
class Target:
    runtime: str
    backend: str

    @classmethod
    def parse(cls, text: str) -> Target:
        name = text.strip().lower()
        if name not in KNOWN_TARGETS:
            raise UsageError(f"unknown target {text!r}; known targets: {', '.join(KNOWN_TARGETS)}")
        runtime, backend = name.split("/", 1)
        return cls(runtime, backend)

    @property
    def name(self) -> str:
        return f"{self.runtime}/{self.backend}"

    @property
    def is_accelerator(self) -> bool:
        """True where ops that land on the CPU count as fallbacks."""
        return self.backend not in ("cpu",)

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
