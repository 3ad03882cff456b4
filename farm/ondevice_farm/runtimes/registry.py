"""The one table of the controller side's runtimes: the rest of the farm asks it, never a name.

Each entry is a plugin folder's `SPEC` (pure data; its code is imported only when a target of
the runtime is compiled). The order is the order of `KNOWN_TARGETS` and of every listing.
"""

from __future__ import annotations

from ondevice_farm.runtimes import coreml, executorch, iree, litert, ort, tvm
from ondevice_farm.runtimes.spec import SOURCE_ONNX, RuntimeSpec

RUNTIMES: dict[str, RuntimeSpec] = {
    spec.name: spec for spec in (ort.SPEC, coreml.SPEC, executorch.SPEC, litert.SPEC, tvm.SPEC, iree.SPEC)
}


def runtime_spec(name: str) -> RuntimeSpec | None:
    return RUNTIMES.get(name)


def target_names() -> tuple[str, ...]:
    """Every `runtime[-route]/backend` the farm compiles for, in the table's order."""
    names: list[str] = []
    for spec in RUNTIMES.values():
        prefixes = [spec.name] + [f"{spec.name}-{route.name}" for route in spec.routes]
        names += [f"{prefix}/{backend}" for prefix in prefixes for backend in spec.backend_names]
    return tuple(names)


def fallback_kernels() -> frozenset[str]:
    """Every runtime's CPU kernels, as placements name them: an op there on an accelerator target
    is a fallback."""
    return frozenset(kernel for spec in RUNTIMES.values() for kernel in spec.fallback_kernels)


def checkpoint_sources() -> str:
    """The targets that convert a PyTorch checkpoint without ONNX, for messages: `a/*, b/* and c/*`."""
    names = [f"{spec.name}/*" for spec in RUNTIMES.values() if spec.source != SOURCE_ONNX]
    names += [
        f"{spec.name}-{route.name}/*"
        for spec in RUNTIMES.values()
        for route in spec.routes
        if route.source != SOURCE_ONNX
    ]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)
