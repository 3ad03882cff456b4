"""The inputs of a job: shapes from the model and `--shape`, values seeded or from `--inputs`.

The same inputs go to the host reference and to every device, so the numeric diff compares
like with like.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.model import ModelInfo, TensorSpec

DEFAULT_DYNAMIC_DIM = 1
DEFAULT_INT_HIGH = 10
_SHAPE_RE = re.compile(r"^\s*([^=\s]+)\s*=\s*(\d+(?:\s*[xX,]\s*\d+)*)\s*$")
_E = TypeVar("_E", bound=FarmError)


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


@dataclass(frozen=True)
class UnpinnedDims:
    """The inputs whose dynamic dims no `--shape` pinned, with the shapes the farm used for them
    (`resolve_shapes` sets such a dim to DEFAULT_DYNAMIC_DIM, an `--inputs` array to its own size).

    A size the farm chose is a common hidden cause of a failed compile or run (an STFT's Conv over
    a sequence of 1 sample): a failure names these inputs and the `--shape` that pins them.
    """

    #: (the input as the model declares it, the shape the farm used)
    inputs: tuple[tuple[TensorSpec, tuple[int, ...]], ...]

    def note(self) -> str:
        """One sentence: which dims, the sizes they got, and the `--shape` that pins them."""
        declared = ", ".join(f"{spec.name}[{', '.join(map(str, spec.shape))}]" for spec, _ in self.inputs)
        used = ", ".join(f"{spec.name}={'x'.join(map(str, shape))}" for spec, shape in self.inputs)
        chosen = all(
            got == DEFAULT_DYNAMIC_DIM
            for spec, shape in self.inputs
            for want, got in zip(spec.shape, shape, strict=True)
            if not isinstance(want, int)
        )
        sizes = f"set to {DEFAULT_DYNAMIC_DIM} by the farm ({used})" if chosen else f"the farm used {used}"
        pins = " ".join(f"--shape {spec.name}={_pin(spec, shape)}" for spec, shape in self.inputs)
        return (
            f"dynamic dims that no --shape pinned: {declared}, {sizes}; "
            f"pin them at the sizes the model takes: {pins}"
        )

    def explained(self, error: _E) -> _E:
        """`error`, of its type, with the note after its message; its hint kept where it is the
        error's own, its class's generic one ("pass a valid .onnx file") replaced."""
        hint = error.hint
        if hint and hint == type(error).default_hint:
            hint = "a dynamic dim at a size the model cannot take is a common cause: pin it with --shape"
        return type(error)(with_note(error.message, self.note()), hint=hint)


def unpinned_dims(
    info: ModelInfo, pinned: Mapping[str, tuple[int, ...]], used: Mapping[str, tuple[int, ...]]
) -> UnpinnedDims | None:
    """The inputs of `info` with dynamic dims that `pinned` (`--shape`) leaves out, at the shapes in
    `used`; None where every input is static or pinned."""
    left = tuple(
        (spec, tuple(used[spec.name]))
        for spec in info.inputs
        if not spec.is_static and spec.name not in pinned and spec.name in used
    )
    return UnpinnedDims(left) if left else None


def with_note(message: str, note: str) -> str:
    """`message` and a note on its cause: on a line of its own under a message that lists lines."""
    return f"{message}\n  {note}" if "\n" in message else f"{message}; {note}"


def _pin(spec: TensorSpec, used: tuple[int, ...]) -> str:
    """`--shape`'s value: static dims as declared, a size the farm did not choose (an `--inputs`
    array's) as used, the others as the model's name for them (`input=BATCHxSEQUENCE`)."""
    dims: list[str] = []
    for want, got in zip(spec.shape, used, strict=True):
        if isinstance(want, int):
            dims.append(str(want))
        elif got != DEFAULT_DYNAMIC_DIM:
            dims.append(str(got))
        else:
            dims.append(re.sub(r"[^A-Za-z0-9]+", "_", want).strip("_").upper() or "N")
    return "x".join(dims)


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
