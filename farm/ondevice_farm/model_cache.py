"""A model's description (`ModelInfo`) kept by its content hash, so a model seen before is
described without loading ONNX.

Importing onnx costs a submitter 1-4 s of CPU (its ml_dtypes extension; docs/benchmarks.md),
more than the rest of a warm `farm submit`. What `inspect_model` found, checks passed, depends
only on the file's bytes: it is kept under their sha256 (`FarmHome.models`), and a model that
fails the checker is never kept, so it fails again with its own message.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import sha256_path
from ondevice_farm.model import ModelInfo, TensorSpec, inspect_model

#: bump when `ModelInfo` or what `inspect_model` derives changes: older entries are ignored
CACHE_VERSION = 1


def inspect_model_cached(path: Path, cache_dir: Path | None) -> ModelInfo:
    """`inspect_model(path)`, from `cache_dir` when these bytes were inspected before."""
    if cache_dir is None or not path.is_file():
        return inspect_model(path)  # a missing or odd path fails there, with its own message
    sha = sha256_path(path)
    entry = cache_dir / f"{sha}.v{CACHE_VERSION}.json"
    try:
        return _from_dict(json.loads(entry.read_text()), path, sha)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent, or written by something else: inspect again
    info = inspect_model(path)
    write_atomically(entry, json.dumps(_to_dict(info)))
    return info


def _to_dict(info: ModelInfo) -> dict[str, Any]:
    return {
        "opset": info.opset,
        "inputs": [_spec_dict(s) for s in info.inputs],
        "outputs": [_spec_dict(s) for s in info.outputs],
        "node_count": info.node_count,
        "op_types": info.op_types,
        "index_bounds": info.index_bounds,
    }


def _spec_dict(spec: TensorSpec) -> dict[str, Any]:
    return {"name": spec.name, "dtype": spec.dtype, "shape": list(spec.shape)}


def _spec(data: dict[str, Any]) -> TensorSpec:
    shape = tuple(d if isinstance(d, int) else str(d) for d in data["shape"])
    return TensorSpec(str(data["name"]), str(data["dtype"]), shape)


def _from_dict(data: dict[str, Any], path: Path, sha: str) -> ModelInfo:
    return ModelInfo(
        path=path,
        sha256=sha,
        name=path.stem,
        opset=int(data["opset"]),
        inputs=tuple(_spec(s) for s in data["inputs"]),
        outputs=tuple(_spec(s) for s in data["outputs"]),
        node_count=int(data["node_count"]),
        op_types={str(k): int(v) for k, v in data["op_types"].items()},
        index_bounds={str(k): int(v) for k, v in data["index_bounds"].items()},
    )


def write_atomically(path: Path, text: str) -> None:
    """A reader sees the whole entry or none; two writers of one entry write the same bytes."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError:
        return  # a read-only farm directory: the cache is an optimisation, not a requirement
