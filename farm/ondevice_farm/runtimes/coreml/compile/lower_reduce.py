"""ONNX reductions (ReduceSum, ReduceMax, ReduceLogSumExp, ...) -> MIL's reduce ops.

Two cases MIL's ops do not take: an empty set (a reduced axis of size 0), whose result is the
reduction's identity ONNX's reference gives (+inf for ReduceMin, -inf for ReduceMax and
ReduceLogSumExp, ...) and so a constant; and boolean ReduceMax/ReduceMin (any/all), reduced as
int32 0/1 and cast back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lower_tensor import axes_input
from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable

#: the value ONNX's reference gives a reduction over nothing, by op type (float inputs)
_EMPTY_SET = {
    "reduce_sum": 0.0,
    "reduce_l1_norm": 0.0,
    "reduce_l2_norm": 0.0,
    "reduce_sum_square": 0.0,
    "reduce_prod": 1.0,
    "reduce_max": -np.inf,
    "reduce_min": np.inf,
    "reduce_log_sum": -np.inf,
    "reduce_log_sum_exp": -np.inf,
    "reduce_mean": np.nan,
}

#: boolean ReduceMax is any(), ReduceMin all(): the same ops over 0/1
_BOOLEAN = frozenset({"reduce_max", "reduce_min"})


def _reduce(mil_op: str) -> LowerFn:
    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        attrs = lw.attrs(node)
        # ReduceSum takes axes as an input from opset 13, the others from opset 18.
        axes = axes_input(lw, node, 1)
        keep = bool(attrs.get("keepdims", 1))
        x = lw.var(node.input[0])
        if not axes:
            if int(attrs.get("noop_with_empty_axes", 0)):
                return [lw.mb.identity(x=x, name=lw.name(node))]
            axes = list(range(len(x.shape)))
        axes = [a % len(x.shape) for a in axes]
        dtype = lw.dtype_of(node.input[0])
        if any(x.shape[a] == 0 for a in axes):
            return [_empty_set(lw, node, mil_op, dtype, axes, keep)]
        if dtype == "bool":
            if mil_op not in _BOOLEAN:
                raise NotLowerable(f"{node.op_type} of a boolean tensor")
            as_int = lw.mb.cast(x=x, dtype="int32")
            reduced = getattr(lw.mb, mil_op)(x=as_int, axes=axes, keep_dims=keep)
            return [lw.mb.cast(x=reduced, dtype="bool", name=lw.name(node))]
        return [getattr(lw.mb, mil_op)(x=x, axes=axes, keep_dims=keep, name=lw.name(node))]

    lower.__name__ = f"lower_{mil_op}"
    return lower


def _empty_set(
    lw: Lowering, node: onnx.NodeProto, mil_op: str, dtype: str, axes: list[int], keep: bool
) -> np.ndarray:
    """The reduction over an empty axis: its identity, in the output's shape (a constant)."""
    dims = lw.static_dims(node.input[0])
    kept = [1 if i in axes else d for i, d in enumerate(dims) if keep or i not in axes]
    if any(d is None for d in kept):
        raise NotLowerable(f"{node.op_type} over an empty axis needs the other dims static")
    shape = [int(d) for d in kept if d is not None]
    value = _EMPTY_SET[mil_op]
    if dtype == "bool":
        # any() of nothing is False, all() of nothing True
        return np.full(shape, mil_op == "reduce_min", bool)
    if dtype.startswith(("int", "uint")):
        if not np.isfinite(value):
            info = np.iinfo(np.int32)
            value = info.max if value > 0 else info.min
        return np.full(shape, value, np.int32)
    return np.full(shape, value, np.float32)


REDUCE_LOWERINGS: dict[str, LowerFn] = {
    "ReduceMean": _reduce("reduce_mean"),
    "ReduceSum": _reduce("reduce_sum"),
    "ReduceMax": _reduce("reduce_max"),
    "ReduceMin": _reduce("reduce_min"),
    "ReduceProd": _reduce("reduce_prod"),
    "ReduceL1": _reduce("reduce_l1_norm"),
    "ReduceL2": _reduce("reduce_l2_norm"),
    "ReduceSumSquare": _reduce("reduce_sum_square"),
    "ReduceLogSum": _reduce("reduce_log_sum"),
    "ReduceLogSumExp": _reduce("reduce_log_sum_exp"),
}
