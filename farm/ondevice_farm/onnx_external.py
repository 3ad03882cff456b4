"""ONNX models whose weights live in external data files beside them (`onnx.save_model(...,
save_as_external_data=True)`; what exporters write past protobuf's 2 GiB and often before).

Such a model is its `.onnx` file *and* those files: its identity (the sha256 every cache and
baseline is keyed by) covers both, and wherever the farm copies, ships or uploads it, the files go
along at the relative locations the model names.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from ondevice_farm.errors import ModelError

#: the ONNX TensorProto.DataLocation value of a tensor whose bytes are in an external file
_EXTERNAL = 1


def external_files(model_path: Path) -> tuple[str, ...]:
    """The external data files `model_path` names, relative to its directory, sorted; () for a
    model without any and for anything that is not an `.onnx` file.

    ModelError when a named file is missing, or its location leaves the model's directory (an
    absolute path or `..`: ONNX Runtime refuses those too, and the farm would copy files the
    user never meant to send)."""
    if model_path.suffix.lower() != ".onnx" or not model_path.is_file():
        return ()
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # protobuf's DecodeError and friends: not a model, so no external files
        return ()
    locations = set()
    for tensor in _get_all_tensors(model):
        if tensor.data_location != _EXTERNAL:
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        locations.add(_checked(model_path, tensor.name, entries.get("location", "")))
    return tuple(sorted(locations))


def _checked(model_path: Path, tensor: str, location: str) -> str:
    relative = PurePosixPath(location.replace("\\", "/"))
    if not location or relative.is_absolute() or ".." in relative.parts:
        raise ModelError(
            f"{model_path}: tensor {tensor!r} keeps its data at {location!r}, outside the model's folder",
            hint="save it with its external data beside it: onnx.save_model(..., location='NAME.data')",
        )
    if not (model_path.parent / relative).is_file():
        raise ModelError(
            f"{model_path}: its external data file {location} is missing (tensor {tensor!r})",
            hint="keep the .data file(s) the exporter wrote beside the .onnx file",
        )
    return relative.as_posix()
