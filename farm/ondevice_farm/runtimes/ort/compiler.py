"""ONNX Runtime's entry in the runtime registry: compiled through its cache where it is given one."""

from __future__ import annotations

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.compile.request import CompileRequest


def compile_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    if request.cache is not None:
        from ondevice_farm.runtimes.ort.cache import compile_ort_cached

        cache = request.cache
        return compile_ort_cached(
            request.model_path, cache.source_sha256, request.target, store, cache.directory
        )
    from ondevice_farm.runtimes.ort.compile import compile_ort

    return compile_ort(request.model_path, request.target, store)
