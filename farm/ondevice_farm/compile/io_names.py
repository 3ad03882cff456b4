"""The I/O name map of a compiled artifact: ONNX tensor name <-> the runtime's feature name.

CoreML ML Programs cannot hold every ONNX name (`input.1` becomes `input_1`, `out:0` becomes
`out_0`, `495` becomes `t_495`, and two names equal after that get a suffix). The CoreML
compile writes one map beside the artifact (`<artifact>.io.json`); the iOS agent writes the
job file under the feature names with it and gives the outputs back under their ONNX names,
so the reference diff compares like with like. docs/ios-runner.md describes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.errors import ModelError

#: the map's file beside an artifact: `model.mlpackage` -> `model.mlpackage.io.json`
SIDECAR_SUFFIX = ".io.json"


@dataclass(frozen=True)
class Feature:
    """One input or output: its ONNX name, its name in the compiled model, shape and dtype there."""

    onnx_name: str
    feature_name: str
    dtype: str
    shape: tuple[int, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "onnx_name": self.onnx_name,
            "feature_name": self.feature_name,
            "dtype": self.dtype,
            "shape": list(self.shape),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Feature:
        return cls(
            onnx_name=str(data["onnx_name"]),
            feature_name=str(data["feature_name"]),
            dtype=str(data["dtype"]),
            shape=tuple(int(d) for d in data["shape"]),
        )


@dataclass(frozen=True)
class IoNameMap:
    """Every input and output of one compiled model, in the model's order."""

    inputs: tuple[Feature, ...]
    outputs: tuple[Feature, ...]

    def input_feature(self, onnx_name: str) -> str:
        """The feature name of an ONNX input; the name itself where the map does not know it."""
        return next((f.feature_name for f in self.inputs if f.onnx_name == onnx_name), onnx_name)

    def output_onnx_name(self, feature_name: str) -> str:
        """The ONNX name of an output feature; the name itself where the map does not know it."""
        return next((f.onnx_name for f in self.outputs if f.feature_name == feature_name), feature_name)

    @property
    def renamed(self) -> list[Feature]:
        return [f for f in (*self.inputs, *self.outputs) if f.onnx_name != f.feature_name]

    def as_json(self) -> dict[str, Any]:
        return {
            "inputs": [f.as_json() for f in self.inputs],
            "outputs": [f.as_json() for f in self.outputs],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IoNameMap:
        return cls(
            inputs=tuple(Feature.from_json(f) for f in data["inputs"]),
            outputs=tuple(Feature.from_json(f) for f in data["outputs"]),
        )

    def check_unique(self) -> None:
        """A map two ONNX names share a feature in (or the reverse) would mix tensors up."""
        for kind, features in (("input", self.inputs), ("output", self.outputs)):
            for attr in ("onnx_name", "feature_name"):
                names = [getattr(f, attr) for f in features]
                twice = sorted({n for n in names if names.count(n) > 1})
                if twice:
                    raise ModelError(f"the I/O name map holds {kind} {attr} {twice[0]!r} twice")


def sidecar_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + SIDECAR_SUFFIX)


def save_io_names(io_names: IoNameMap, artifact: Path) -> Path:
    """Write the map beside `artifact` (atomically: a reader never sees half of it)."""
    path = sidecar_path(artifact)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(io_names.as_json(), indent=1) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def load_io_names(artifact: Path) -> IoNameMap | None:
    """The map stored beside `artifact`, or None where the compile wrote none (ONNX artifacts)."""
    path = sidecar_path(artifact)
    if not path.is_file():
        return None
    try:
        return IoNameMap.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{path} is not an I/O name map: {exc}") from None
