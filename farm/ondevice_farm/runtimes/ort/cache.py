"""ONNX Runtime compiles kept by source hash, target and ONNX Runtime version.

A warm `farm submit` of a model compiled before skips ORT's two optimisation passes and, with
the model's description cached too (`ondevice_farm.model_cache`), never imports onnx (1-4 s of
CPU; docs/benchmarks.md). The compiled artifact itself stays where it always is, in the
content-addressed artifact store; an entry here holds its hash and the compile report, and is
used only while that artifact is still in the store. The key names the installed onnxruntime
distributions and their versions: another ORT optimises (and places) differently.
"""

from __future__ import annotations

import functools
import json
from importlib import metadata
from pathlib import Path

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.cached import report_from_dict
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.model_cache import write_atomically
from ondevice_farm.targets import Target

#: bump when `compile_ort` or the report it writes changes: older entries are ignored
CACHE_VERSION = 2
#: the distributions that install the `onnxruntime` package, each with its own providers
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-qnn")
SHIPPED_NAME = "model.onnx"


@functools.cache
def ort_identity() -> str:
    """e.g. `onnxruntime==1.32.0`: which ONNX Runtime would compile, without importing it."""
    found = []
    for name in ORT_DISTRIBUTIONS:
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return "+".join(found) or "none"


def compile_ort_cached(
    model_path: Path, source_sha256: str, target: Target, store: ArtifactStore, cache_dir: Path
) -> CompiledArtifact:
    """`compile_ort`, from `cache_dir` when this model was compiled for `target` by this ORT."""
    key = f"{source_sha256}-{target.name.replace('/', '-')}-{ort_identity()}-v{CACHE_VERSION}"
    entry = cache_dir / f"{key}.json"
    try:
        data = json.loads(entry.read_text())
        path = store.path_for(str(data["sha256"]), SHIPPED_NAME)
        if path.is_file():
            return CompiledArtifact(target, path, str(data["sha256"]), report_from_dict(data["report"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent, or not an entry of this version: compile
    from ondevice_farm.runtimes.ort.compile import compile_ort

    compiled = compile_ort(model_path, target, store)
    write_atomically(entry, json.dumps({"sha256": compiled.sha256, "report": compiled.report.to_dict()}))
    return compiled
