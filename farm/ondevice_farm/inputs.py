"""The inputs of a job: shapes from the model and `--shape`, values seeded or from `--inputs`.

The same inputs go to the host reference and to every device, so the numeric diff compares
like with like.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ondevice_farm.errors import UsageError
from ondevice_farm.model import ModelInfo, TensorSpec

DEFAULT_DYNAMIC_DIM = 1
DEFAULT_INT_HIGH = 10
_SHAPE_RE = re.compile(r"^\s*([^=\s]+)\s*=\s*(\d+(?:\s*[xX,]\s*\d+)*)\s*$")


def parse_shapes(items: tuple[str, ...] | list[str]) -> dict[str, tuple[int, ...]]:
    """`["image=1x3x224x224", "mask=1x64"]` -> {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        for part in item.split(";"):
            if not part.strip():
                continue
            match = _SHAPE_RE.match(part)
            if not match:
                raise UsageError(f"--shape {part!r} is not NAME=DxDx... (e.g. image=1x3x224x224)")
            dims = tuple(int(d) for d in re.split(r"\s*[xX,]\s*", match.group(2)))
            if any(d <= 0 for d in dims):
                raise UsageError(f"--shape {part!r}: every dimension must be positive")
            shapes[match.group(1)] = dims
    return shapes


def resolve_shapes(info: ModelInfo, overrides: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """A concrete shape per input; `--shape` fills dynamic dims and must agree with static ones."""
    known = {spec.name: spec for spec in info.inputs}
    for name in overrides:
        if name not in known:
            raise UsageError(
                f"--shape names input {name!r}, but the model's inputs are: "
                + ", ".join(spec.describe() for spec in info.inputs)
            )
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in info.inputs:
        if spec.name in overrides:
            shapes[spec.name] = _fit(spec, overrides[spec.name])
        else:
            shapes[spec.name] = tuple(d if isinstance(d, int) else DEFAULT_DYNAMIC_DIM for d in spec.shape)
    return shapes


def _fit(spec: TensorSpec, shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) != len(spec.shape):
        raise UsageError(
            f"--shape {spec.name}={'x'.join(map(str, shape))} has rank {len(shape)}, "
            f"but the model declares {spec.describe()}"
        )
    for axis, (want, got) in enumerate(zip(spec.shape, shape, strict=True)):
        if isinstance(want, int) and want != got:
            raise UsageError(
                f"--shape {spec.name}={'x'.join(map(str, shape))} does not fit {spec.describe()}: "
                f"dimension {axis} is fixed at {want}"
            )
    return shape


def seeded_inputs(info: ModelInfo, shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    """Deterministic inputs: N(0,1) floats; integers in [0, bound) where bound is an embedding's size."""
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    for spec in info.inputs:
        shape = shapes[spec.name]
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            values[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            high = info.index_bounds.get(spec.name, DEFAULT_INT_HIGH)
            values[spec.name] = rng.integers(0, high, size=shape).astype(dtype)
        elif dtype.kind == "b":
            values[spec.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:  # pragma: no cover - ModelInfo only admits the dtypes above
            raise UsageError(f"cannot make seeded values for {spec.describe()}")
    return values


def load_npz_inputs(path: Path, info: ModelInfo, seeded: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`--inputs file.npz`: arrays named like the model's inputs replace the seeded ones."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            given = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as exc:
        raise UsageError(f"--inputs {path}: not a readable .npz file ({exc})") from None
    specs = {spec.name: spec for spec in info.inputs}
    merged = dict(seeded)
    for name, array in given.items():
        spec = specs.get(name)
        if spec is None:
            raise UsageError(f"--inputs {path}: array {name!r} is not a model input ({', '.join(specs)})")
        if array.dtype != np.dtype(spec.dtype):
            raise UsageError(f"--inputs {path}: {name!r} is {array.dtype}, the model wants {spec.dtype}")
        _fit(spec, tuple(int(d) for d in array.shape))
        merged[name] = array
    return merged
