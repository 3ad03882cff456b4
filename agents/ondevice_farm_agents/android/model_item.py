"""The ONNX model as the push cache takes it: the file alone, or, when its weights are in external
data files (`ondevice_farm.onnx_external`), one folder entry of the model and those files at the
locations it names, since ONNX Runtime looks for them beside the model."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm.onnx_external import external_files
from ondevice_farm_agents.android.push_cache import Cached, CachedFile, describe, folder_of

#: the model's name on the unit, as a file entry and inside a folder entry
MODEL_NAME = "model.onnx"


def model_item(artifact: Path, sha256: str) -> Cached:
    """`sha256`: the artifact's (trusted for a lone file, as the store computed it)."""
    data = external_files(artifact)
    if not data:
        return describe(artifact, MODEL_NAME, sha256)
    files = [describe(artifact, MODEL_NAME), *(describe(artifact.parent / name, name) for name in data)]
    return folder_of(artifact.parent, files, "model")


def model_on_unit(item: Cached, device_path: str) -> str:
    """The model file's path on the unit, given where the cache put `item`."""
    return device_path if isinstance(item, CachedFile) else f"{device_path}/{MODEL_NAME}"


def model_data_names(item: Cached) -> tuple[str, ...]:
    """The external data files beside the model (paths relative to it); () for a lone file."""
    return () if isinstance(item, CachedFile) else tuple(f.name for f in item.files if f.name != MODEL_NAME)
