"""A compiler's result kept by what decides it, for runtimes whose compile costs seconds (TVM,
IREE: 4-15 s a target here; ExecuTorch and LiteRT: 5-40 s): a second submit of the same model
for the same target, shapes and settings by the same compiler version reuses the stored artifact
and its report.

The artifact itself stays in the content-addressed artifact store; an entry holds its hash and
the compile report, and is used only while the artifact (and each sidecar the runtime writes) is
still there, so `farm gc` removing an artifact just means one more compile. ONNX Runtime keeps
its own cache (runtimes/ort/cache.py), which this shares the entry format with."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.io_names import load_io_names
from ondevice_farm.compile.report import CompiledArtifact, CompileReport, OpCountChange
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.stored import store_built
from ondevice_farm.model_cache import write_atomically
from ondevice_farm.targets import Target

#: bump when what an entry holds changes: older entries are ignored
CACHE_VERSION = 1


def report_from_dict(data: dict[str, Any]) -> CompileReport:
    """The inverse of `CompileReport.to_dict`."""
    fields = dict(data)
    fields["fusions"] = [OpCountChange(**f) for f in data["fusions"]]
    return CompileReport(**fields)


def cache_key(request: CompileRequest, identity: str) -> str:
    """Everything a compile's output depends on: the source, the target, the shapes and settings
    the request carries, and the compiler (`identity`: its versions, and anything of the machine
    it compiles for)."""
    decided_by = {
        "source": request.cache.source_sha256 if request.cache else None,
        "target": request.target.name,
        "shapes": {name: list(shape) for name, shape in sorted(request.input_shapes.items())},
        "precision": request.precision,
        "quantization": request.quantization,
        "fixed_inputs": request.fixed_inputs,
        # a checkpoint runtime compiles the checkpoint itself, not the ONNX model the source names
        "checkpoint": request.checkpoint.sha256 if request.checkpoint is not None else None,
        "identity": identity,
        "version": CACHE_VERSION,
    }
    text = json.dumps(decided_by, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def compiled_once(
    request: CompileRequest,
    store: ArtifactStore,
    *,
    identity: str,
    artifact_name: str,
    sidecar_suffixes: tuple[str, ...],
    build: Callable[[], CompiledArtifact],
) -> CompiledArtifact:
    """`build()`'s result, from the request's cache when this compile was done before."""
    if request.cache is None:
        return build()
    entry = request.cache.directory / f"{request.target.runtime}-{cache_key(request, identity)}.json"
    found = _from_entry(entry, request, store, artifact_name, sidecar_suffixes)
    if found is not None:
        return found
    compiled = build()
    write_atomically(entry, json.dumps({"sha256": compiled.sha256, "report": compiled.report.to_dict()}))
    return compiled


def _from_entry(
    entry: Path, request: CompileRequest, store: ArtifactStore, artifact_name: str, sidecars: tuple[str, ...]
) -> CompiledArtifact | None:
    try:
        data = json.loads(entry.read_text())
        path = store.path_for(str(data["sha256"]), artifact_name)
        if not path.is_file() or not all(Path(str(path) + s).is_file() for s in sidecars):
            return None
        report = report_from_dict(data["report"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, or not an entry of this version: compile
    return CompiledArtifact(request.target, path, str(data["sha256"]), report, load_io_names(path))


#: a compiler of the ONNX model: (model, target, scratch folder, input shapes, what the model is) ->
#: the artifact in the scratch folder
OnnxConverter = Callable[[Path, Target, Path, dict[str, tuple[int, ...]], str], CompiledArtifact]


def compile_onnx_once(
    request: CompileRequest, store: ArtifactStore, convert: OnnxConverter, identity: str
) -> CompiledArtifact:
    """The registry entry of a runtime that compiles the ONNX model (a checkpoint's ONNX export)
    in seconds (TVM, IREE): built in a scratch folder, stored with its spec's sidecars, and kept."""
    spec = request.target.spec
    source = (
        "the ONNX export of the PyTorch checkpoint" if request.checkpoint is not None else "the ONNX model"
    )

    def build() -> CompiledArtifact:
        with tempfile.TemporaryDirectory(prefix=f"farm-{request.target.runtime}-") as tmp:
            built = convert(request.model_path, request.target, Path(tmp), request.input_shapes, source)
            return store_built(built, store, spec.sidecar_suffixes)

    return compiled_once(
        request,
        store,
        identity=identity,
        artifact_name=spec.artifact_name,
        sidecar_suffixes=spec.sidecar_suffixes,
        build=build,
    )
