"""Compile one model for one target. ONNX Runtime here; CoreML in `farm.compile.coreml`."""

from __future__ import annotations

import tempfile
from pathlib import Path

from farm.artifacts import ArtifactStore
from farm.compile.report import CompiledArtifact
from farm.errors import UsageError
from farm.targets import Target


def compile_for_target(
    model_path: Path,
    target: Target,
    store: ArtifactStore,
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    coreml_precision: str = "fp16",
    coreml_quantization: str = "keep",
) -> CompiledArtifact:
    if target.runtime == "ort":
        from farm.compile.ort import compile_ort

        return compile_ort(model_path, target, store)
    if target.runtime == "coreml":
        try:
            from farm.compile.coreml import compile_coreml
        except ImportError as exc:
            raise UsageError(
                f"{target} needs coremltools ({exc})", hint="pip install 'farm[coreml]'"
            ) from None
        with tempfile.TemporaryDirectory(prefix="farm-coreml-") as tmp:
            built = compile_coreml(
                model_path,
                target,
                Path(tmp),
                precision=coreml_precision,
                input_shapes=input_shapes,
                quantization=coreml_quantization,
            )
            sha, path = store.put(built.path, built.path.name)
        return CompiledArtifact(target=target, path=path, sha256=sha, report=built.report)
    raise UsageError(f"no compiler for runtime {target.runtime!r}")
