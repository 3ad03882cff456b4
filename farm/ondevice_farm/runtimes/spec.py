"""What the farm needs to know of a runtime before it loads any of its code: the value types of
the runtime registry (`ondevice_farm.runtimes.registry`).

A runtime is a plugin (pluggy's hook spec, ONNX Runtime's execution providers): a folder
`ondevice_farm/runtimes/<name>/` whose `__init__` holds its `SPEC` (pure data, imported by
`targets.py`, so it imports nothing heavy) and whose modules hold the compiler the spec names by
`module:function`, imported only when a target of the runtime is compiled. The agent side has a
registry of its own (`ondevice_farm_agents.runtimes`). docs/runtimes.md is the guide.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: what a compiler reads
SOURCE_ONNX = "onnx"
#: a PyTorch checkpoint (`.pt2` from torch.export.save, a TorchScript `.pt`), not its ONNX export
SOURCE_CHECKPOINT = "checkpoint"
#: a model folder (ONNX Runtime GenAI's `genai_config.json` and its ONNX files)
SOURCE_FOLDER = "folder"
SOURCES = (SOURCE_ONNX, SOURCE_CHECKPOINT, SOURCE_FOLDER)


@dataclass(frozen=True)
class BackendSpec:
    """One backend of a runtime: the second half of a target `runtime/backend`."""

    name: str
    #: what the runtime is asked for: an execution provider, compute units, a partitioner, a
    #: delegate ("" where the runtime's own kernels run everything)
    native: str
    #: what it means on a device, in a phrase (`farm targets`, docs)
    meaning: str
    #: True where ops that land on the runtime's CPU kernels count as fallbacks
    accelerator: bool = True
    #: what its kernels compute an fp32 graph in (a driver that relaxes to fp16, CUDA's TF32);
    #: the default tolerance follows it (analysis/tolerance.py)
    computes_fp32_in: str = "fp32"


@dataclass(frozen=True)
class RouteSpec:
    """A second way to build the runtime's artifact, written `runtime-route/backend`
    (`coreml-torch/ane`): another converter on another source, the same devices and backends."""

    name: str
    source: str
    #: `module:function` taking (CompileRequest, ArtifactStore), returning a CompiledArtifact
    compiler: str
    description: str


@dataclass(frozen=True)
class RuntimeSpec:
    """A runtime as the controller side sees it (compiling, reports, target names)."""

    name: str
    #: the name people use ("ONNX Runtime")
    title: str
    backends: tuple[BackendSpec, ...]
    #: what the default route compiles from (SOURCE_*); `extra_sources` it also takes as they are
    source: str
    #: `module:function` taking (CompileRequest, ArtifactStore), returning a CompiledArtifact
    compiler: str
    #: the install extra (`pip install 'ondevice-farm[EXTRA]'`); "" where the base install has it
    extra: str
    extra_sources: tuple[str, ...] = ()
    routes: tuple[RouteSpec, ...] = ()
    #: where ops the accelerator left run, as placements and per-op profiles name them
    fallback_kernels: tuple[str, ...] = ()
    #: the artifact's file name in the store, and files kept beside it under the same hash
    artifact_name: str = ""
    sidecar_suffixes: tuple[str, ...] = ()

    def backend(self, name: str) -> BackendSpec:
        for backend in self.backends:
            if backend.name == name:
                return backend
        raise KeyError(f"{self.name} has no backend {name!r}")

    def route(self, name: str) -> RouteSpec | None:
        for route in self.routes:
            if route.name == name:
                return route
        return None

    @property
    def backend_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)


def load_entry(reference: str) -> Callable[..., Any]:
    """`package.module:function` -> the function, its module imported now (entry points' syntax)."""
    module, _, name = reference.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function
