"""`--fix NAME=VALUE` (or `--fix NAME` with the value from an inputs file): scalar inputs pinned
to a constant, so the `If`s and shapes that depend on them fold (a VAD model's sample rate).

One parser and one set of checks for `farm compile`, `farm submit` and the lowering itself
(`onnx_graph.with_fixed_inputs`), so all three refuse a pin alike. numpy only: a submission
checks its pins before anything is compiled or stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ondevice_farm.errors import UsageError

FIX_HINT = "e.g. --fix sr=16000, or --fix sr with an inputs .npz that holds sr"


def parse_fixes(fixes: Iterable[str]) -> dict[str, float | None]:
    """`--fix` options as {name: value}; None for `--fix NAME` alone, whose value the inputs file
    gives (`fixes_from_inputs`). A malformed one is a UsageError."""
    pinned: dict[str, float | None] = {}
    for fix in fixes:
        name, sep, value = fix.partition("=")
        number: float | None = None
        if sep:
            try:
                number = float(value)
            except ValueError:
                number = None
        if not name or (sep and number is None):
            raise UsageError(f"--fix {fix!r} is not NAME=VALUE with a number", hint=FIX_HINT)
        pinned[name] = number
    return pinned


def check_pinned_names(fixed: Iterable[str], input_names: Iterable[str]) -> None:
    """Every pinned name is one of the model's inputs."""
    names = sorted(input_names)
    unknown = sorted(set(fixed) - set(names))
    if unknown:
        raise UsageError(
            f"--fix names {', '.join(unknown)}, which the model does not have as an input",
            hint=f"the model's inputs are: {', '.join(names)}",
        )


def fixes_from_inputs(
    fixed: Mapping[str, float | None], given: Mapping[str, np.ndarray], source: str | None
) -> dict[str, float]:
    """The pins with every `--fix NAME` given its value from `given` (the arrays of `source`, an
    inputs file; None where there is none)."""
    resolved: dict[str, float] = {}
    for name, value in fixed.items():
        if value is not None:
            resolved[name] = value
            continue
        if source is None or name not in given:
            where = f"{source} has no array {name!r}" if source is not None else "no inputs file gives it"
            raise UsageError(f"--fix {name} has no value and {where}; use --fix NAME=VALUE", hint=FIX_HINT)
        array = np.asarray(given[name])
        if array.size != 1:
            raise UsageError(
                f"--fix {name}: only a scalar (or single-element) input can be pinned; "
                f"{source} holds {name} with shape {list(array.shape)}"
            )
        resolved[name] = float(array.reshape(-1)[0])
    return resolved


def pinned_array(name: str, value: float, shape: Iterable[int | str], dtype: np.dtype) -> np.ndarray:
    """`value` as the input's constant: its (all-ones) shape and dtype; a UsageError where the input
    is not a scalar or its dtype cannot hold the value (sr=0.5 for an int64 sr)."""
    dims = list(shape)
    if not all(d == 1 for d in dims):
        raise UsageError(
            f"--fix {name}: only a scalar (or single-element) input can be pinned; {name} has shape {dims}"
        )
    pinned = np.full([int(d) for d in dims], value).astype(dtype)
    if np.dtype(dtype).kind in "iub" and float(pinned.reshape(-1)[0]) != float(value):
        raise UsageError(f"--fix {name}={value:g}: {name} is {np.dtype(dtype).name}, which cannot hold it")
    return pinned
