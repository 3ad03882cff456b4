"""A host executor for MIL programs, in numpy.

It runs the program coremltools produced (after its passes), op by op, and stores
every tensor in the dtype its MIL var has: in an fp16 program each intermediate is
rounded to fp16, as it is between ops on the device, while each op computes in fp32
(the accumulation precision of the GPU and Neural Engine). So it predicts storage
drift, not each kernel's internal rounding.

Ops with a numpy `value_inference` in coremltools run through it; the rest, and
layout ops whose value_inference only knows static shapes, run in `kernels.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ondevice_farm.runtimes.coreml.compile.kernels import KERNELS


class ExecutorError(Exception):
    """The program holds an op the host executor cannot run."""


class _Held:
    """Stands in for a MIL sym_val while an op's value_inference reads its inputs."""

    __slots__ = ("val",)

    def __init__(self, val: Any) -> None:
        self.val = val


def run_program(
    program: Any,
    feeds: dict[str, np.ndarray],
    trace: dict[str, np.ndarray] | None = None,
    on_op: Callable[[Any, float], None] | None = None,
) -> dict[str, np.ndarray]:
    """Outputs of the program's `main` function by MIL output name; `feeds` by MIL input name.

    `trace`, where given, receives every op's outputs by MIL var name (for per-layer drift);
    `on_op(op, seconds)` hears how long each op took here (the host stand-in's profiled pass).
    """
    from coremltools.converters.mil.mil import types

    function = program.functions["main"]
    env: dict[int, np.ndarray] = {}
    for name, var in function.inputs.items():
        if name not in feeds:
            raise ExecutorError(f"no value fed for input {name!r}")
        env[id(var)] = np.asarray(feeds[name]).astype(types.nptype_from_builtin(var.dtype))
    for op in function.operations:
        started = time.perf_counter()
        try:
            results = _run_op(op, env)
        except ExecutorError:
            raise
        except Exception as exc:  # numpy and value_inference raise anything on inputs they cannot take
            raise ExecutorError(f"{op.op_type} ({op.name}): {exc}") from exc
        if on_op is not None:
            on_op(op, time.perf_counter() - started)
        for var, value in zip(op.outputs, results, strict=True):
            env[id(var)] = np.asarray(value).astype(types.nptype_from_builtin(var.dtype), copy=False)
            if trace is not None:
                trace[var.name] = env[id(var)]
    return {var.name: env[id(var)] for var in function.outputs}


def _widen(value: np.ndarray) -> np.ndarray:
    return value.astype(np.float32) if value.dtype == np.float16 else value


def _lookup(var: Any, env: dict[int, np.ndarray]) -> np.ndarray:
    if id(var) in env:
        return _widen(env[id(var)])
    if var.val is not None:
        return _widen(np.asarray(var.val))
    raise ExecutorError(f"{var.name} has no value yet: is the program in topological order?")


def _run_op(op: Any, env: dict[int, np.ndarray]) -> list[Any]:
    if op.op_type == "const":
        return [op.outputs[0].val]
    if op.blocks:
        raise ExecutorError(f"{op.op_type} ({op.name}): control flow is not supported by the host executor")
    if op.op_type in _INDEXED and "validate_indices" in op.inputs:
        _check_indices(op, _lookup(op.inputs["indices"], env))
    kernel = KERNELS.get(op.op_type)
    if kernel is not None:
        args: dict[str, Any] = {}
        for name, var in op.inputs.items():
            if isinstance(var, (list, tuple)):
                args[name] = [_lookup(v, env) for v in var]
            else:
                value = _lookup(var, env)
                args[name] = value.item() if value.ndim == 0 and value.dtype.kind in "bUSO" else value
        return kernel(args)
    return _value_inference(op, env)


#: gather/scatter ops whose iOS 17 form (the one with `validate_indices`) takes no negative index
_INDEXED = {"gather", "gather_along_axis", "gather_nd", "scatter", "scatter_along_axis", "scatter_nd"}


def _check_indices(op: Any, indices: np.ndarray) -> None:
    # numpy would count a negative index from the end; the device reads it out of bounds
    if indices.size and int(indices.min()) < 0:
        raise ExecutorError(
            f"{op.op_type} ({op.name}): negative index {int(indices.min())}, out of bounds on iOS 17+"
        )


def _value_inference(op: Any, env: dict[int, np.ndarray]) -> list[Any]:
    from coremltools.converters.mil.mil.operation import Operation

    if type(op).value_inference is Operation.value_inference:
        raise ExecutorError(f"{op.op_type} ({op.name}): the host executor has no kernel for this op")
    held: list[tuple[Any, Any]] = []
    try:
        for var in _input_vars(op):
            if var.val is None:
                held.append((var, var._sym_val))
                var._sym_val = _Held(_lookup(var, env))
            elif isinstance(var.val, np.bool_):
                # a program loaded from a saved package holds numpy bools, which numpy's own
                # `keepdims=` refuses: value_inference is written for the Python bool a builder makes
                held.append((var, var._sym_val))
                var._sym_val = _Held(bool(var.val))
        result = op.value_inference()
    finally:
        for var, previous in held:
            var._sym_val = previous
    if result is None:
        raise ExecutorError(f"{op.op_type} ({op.name}): value inference gave no value")
    return list(result) if len(op.outputs) > 1 else [result]


def _input_vars(op: Any) -> list[Any]:
    found: list[Any] = []
    for var in op.inputs.values():
        found.extend(var if isinstance(var, (list, tuple)) else [var])
    return found
