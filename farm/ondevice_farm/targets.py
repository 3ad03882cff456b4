"""Targets: a runtime and a backend, written `runtime/backend` (e.g. `ort/nnapi`).

A target may also name the route that builds its artifact, `runtime-route/backend`: another
converter on another source for the same devices and backends (`coreml-torch/ane`: coremltools'
PyTorch frontend on the checkpoint). Which runtimes, backends and routes exist, and what each
compiles from, is the runtime registry's to say (`ondevice_farm.runtimes.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ondevice_farm.errors import UsageError
from ondevice_farm.runtimes.registry import runtime_spec, target_names
from ondevice_farm.runtimes.spec import SOURCE_ONNX, BackendSpec, RuntimeSpec

KNOWN_TARGETS: tuple[str, ...] = target_names()


@dataclass(frozen=True, order=True)
class Target:
    runtime: str
    backend: str
    #: "" for the runtime's default route, else the name of one of its other routes (RouteSpec)
    route: str = ""

    @classmethod
    def parse(cls, text: str) -> Target:
        # asks the registry as it is now, so a runtime registered after import parses too
        runtime, _, backend = text.strip().lower().partition("/")
        runtime, _, route = runtime.partition("-")
        spec = runtime_spec(runtime)
        if spec is None or backend not in spec.backend_names or (route and spec.route(route) is None):
            raise UsageError(f"unknown target {text!r}; known targets: {', '.join(target_names())}")
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
    def spec(self) -> RuntimeSpec:
        found = runtime_spec(self.runtime)
        if found is None:
            raise UsageError(f"unknown runtime {self.runtime!r}; known targets: {', '.join(target_names())}")
        return found

    @property
    def backend_spec(self) -> BackendSpec:
        return self.spec.backend(self.backend)

    @property
    def is_accelerator(self) -> bool:
        """True where ops that land on the runtime's CPU kernels count as fallbacks."""
        return self.backend_spec.accelerator

    @property
    def source(self) -> str:
        """What the target's converter reads (`ondevice_farm.runtimes.spec.SOURCE_*`)."""
        route = self.spec.route(self.route) if self.route else None
        return route.source if route is not None else self.spec.source

    @property
    def needs_checkpoint(self) -> bool:
        """True where the converter reads a PyTorch checkpoint, not an ONNX model."""
        return self.source != SOURCE_ONNX

    def ort_providers(self) -> list[str]:
        if self.runtime != "ort":
            raise UsageError(f"{self.name} is not an ONNX Runtime target")
        primary = self.backend_spec.native
        fallback = self.spec.fallback_kernels[0]
        return [primary] if primary == fallback else [primary, fallback]

    def __str__(self) -> str:
        return self.name


def parse_targets(text: str | None) -> list[Target] | None:
    """`ort/cpu,coreml/ane` -> targets; None or empty means "the profile's own"."""
    if not text:
        return None
    return [Target.parse(part) for part in text.split(",") if part.strip()]


def with_torch_routes(targets: list[Target]) -> list[Target]:
    """Each default-route target followed by its twins built by the runtime's other routes from a
    PyTorch source (`coreml/ane` -> `coreml-torch/ane`)."""
    out: list[Target] = []
    for target in targets:
        out.append(target)
        if target.route:
            continue
        for route in target.spec.routes:
            twin = target.with_route(route.name)
            if route.source != SOURCE_ONNX and twin not in targets:
                out.append(twin)
    return out
