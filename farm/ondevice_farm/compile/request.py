"""What a runtime's compiler is given: the runtime interface's one call (docs/runtimes.md).

Every compiler the registry names (`RuntimeSpec.compiler`, `RouteSpec.compiler`) is a function
`(CompileRequest, ArtifactStore) -> CompiledArtifact`: it reads the source its spec says it takes,
puts the artifact (and the files beside it) into the content-addressed store and returns the
compile report in the farm's shape (`compile/report.py`), or raises CompileError naming the op
it refused, UsageError with the install hint where its package is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ondevice_farm.targets import Target

if TYPE_CHECKING:
    from ondevice_farm.artifacts import ArtifactStore
    from ondevice_farm.compile.report import CompiledArtifact
    from ondevice_farm.torch_source.checkpoint import TorchCheckpoint


@dataclass(frozen=True)
class CompileCache:
    """Where a runtime may keep its compiles by the source's hash (a model compiled before costs
    no second pass); a runtime without a cache ignores it."""

    directory: Path
    #: the source model's sha256, the cache's key with the target and the compiler's version
    source_sha256: str


@dataclass(frozen=True)
class CompileRequest:
    #: the ONNX model (or its export from the checkpoint), where the target reads ONNX
    model_path: Path
    target: Target
    #: the PyTorch checkpoint, where the model came as one
    checkpoint: TorchCheckpoint | None = None
    #: input name -> shape, for the inputs the model leaves dynamic
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: what a runtime that chooses its arithmetic computes in (`--coreml-precision`)
    precision: str = "fp16"
    #: `--coreml-quantization`: keep the source's quantisation, or a runtime's own
    quantization: str = "keep"
    #: inputs pinned to one value (`--fix`), folded into the graph by a runtime that can
    fixed_inputs: dict[str, float] | None = None
    cache: CompileCache | None = None


#: the runtime interface's compile call
Compiler = Callable[["CompileRequest", "ArtifactStore"], "CompiledArtifact"]
