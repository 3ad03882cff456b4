"""Compile one model for one target: the runtime registry names the target's compiler
(`ondevice_farm.runtimes`), and this module calls it; it names no runtime.

A target whose converter reads a PyTorch checkpoint (`Target.needs_checkpoint`) compiles the
checkpoint itself (`source`), not its ONNX export.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.compile.request import CompileCache, Compiler, CompileRequest
from ondevice_farm.errors import CompileError, UsageError
from ondevice_farm.runtimes.spec import load_entry
from ondevice_farm.targets import Target

if TYPE_CHECKING:
    from ondevice_farm.inputs import UnpinnedDims
    from ondevice_farm.torch_source.checkpoint import TorchCheckpoint

__all__ = ["CompileCache", "CompileRequest", "compile_for_target", "compiler_for"]


def compiler_for(target: Target) -> Compiler:
    """The function the target's runtime (or route) registered, its module imported now."""
    spec = target.spec
    reference = spec.compiler
    if target.route:
        route = spec.route(target.route)
        if route is None:
            raise UsageError(f"{spec.title} has no route {target.route!r}")
        reference = route.compiler
    return cast(Compiler, load_entry(reference))


def compile_for_target(
    model_path: Path,
    target: Target,
    store: ArtifactStore,
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    coreml_precision: str = "fp16",
    source: TorchCheckpoint | None = None,
    coreml_quantization: str = "keep",
    cache: CompileCache | None = None,
    coreml_fixed_inputs: dict[str, float] | None = None,
    unpinned: UnpinnedDims | None = None,
) -> CompiledArtifact:
    """`cache`: where a runtime that keeps its compiles keeps them by the source's hash (a model
    compiled before costs no second pass); None compiles every time. `unpinned`: the inputs whose
    dynamic dims no `--shape` pinned (`inputs.unpinned_dims`), named in any runtime's CompileError
    with the `--shape` that pins them."""
    request = CompileRequest(
        model_path=model_path,
        target=target,
        checkpoint=source,
        input_shapes=input_shapes or {},
        precision=coreml_precision,
        quantization=coreml_quantization,
        fixed_inputs=coreml_fixed_inputs,
        cache=cache,
    )
    compiler = compiler_for(target)
    try:
        return compiler(request, store)
    except CompileError as exc:
        if unpinned is None:
            raise
        raise unpinned.explained(exc) from exc
