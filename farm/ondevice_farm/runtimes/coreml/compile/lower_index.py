"""ONNX index, order and rearrangement ops (Gather, GatherElements, ScatterND, TopK, CumSum, Range, Mod,
DepthToSpace, SpaceToDepth) -> MIL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lower_elementwise import binary_operands
from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable


def is_static_dim(dim: Any) -> bool:
    return isinstance(dim, (int, np.integer))


def lower_gather(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    data = lw.value(node.input[0])
    axis = int(lw.attrs(node).get("axis", 0))
    rank = len(data.shape)
    axis %= rank
    indices: Any = lw.const(node.input[1])
    if indices is not None:
        dim = data.shape[axis]
        indices = indices.astype(np.int32)
        if is_static_dim(dim):
            indices = np.where(indices < 0, indices + int(dim), indices).astype(np.int32)
        if isinstance(data, np.ndarray) and node.input[0] not in lw.quantized:
            return [np.take(data, indices, axis=axis)]
    else:
        indices = nonnegative_indices(lw, lw.var(node.input[1]), data, [axis])
    # an 8-bit embedding table stays 8-bit (lw.var gives its constexpr op)
    return [lw.mb.gather(x=lw.var(node.input[0]), indices=indices, axis=axis, name=lw.name(node))]


def nonnegative_indices(lw: Lowering, indices: Any, data: Any, axes: list[int]) -> Any:
    """Run-time indices with negatives counted from the end, as ONNX has them.

    From iOS 17 MIL's gather/scatter ops take a negative index as out of bounds (undefined
    result), so `i < 0 ? i + dim : i` is computed in the program. `axes` are the data axes the
    index values address: one axis (Gather, GatherElements) or the leading ones (ScatterND's
    last index dim). Dims not known until run time are read with `shape`.
    """
    indices = lw.mb.cast(x=indices, dtype="int32") if indices.dtype != lw.types.int32 else indices
    dims_known = [data.shape[a] for a in axes]
    if all(is_static_dim(d) for d in dims_known):
        dims: Any = np.array([int(d) for d in dims_known], np.int32)
    else:
        dims = lw.mb.gather(x=lw.mb.shape(x=data), indices=np.array(axes, np.int32), axis=0)
    if len(axes) == 1:
        dims = lw.mb.squeeze(x=dims, axes=[0]) if not isinstance(dims, np.ndarray) else dims.reshape(())
    wrapped = lw.mb.add(x=indices, y=dims)
    return lw.mb.select(cond=lw.mb.less(x=indices, y=np.int32(0)), a=wrapped, b=indices)


def lower_gather_elements(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    axis = int(lw.attrs(node).get("axis", 0)) % len(x.shape)
    indices: Any = lw.const(node.input[1])
    if indices is not None:
        dim = x.shape[axis]
        indices = indices.astype(np.int32)
        if isinstance(dim, (int, np.integer)):
            indices = np.where(indices < 0, indices + int(dim), indices).astype(np.int32)
    else:
        indices = nonnegative_indices(lw, lw.var(node.input[1]), x, [axis])
    return [lw.mb.gather_along_axis(x=x, indices=indices, axis=axis, name=lw.name(node))]


#: ONNX ScatterND reduction -> MIL scatter_nd mode
_SCATTER_MODES = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def lower_scatter_nd(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    reduction = lw.attrs(node).get("reduction", "none")
    if reduction not in _SCATTER_MODES:
        raise NotLowerable(f"ScatterND reduction {reduction!r} is not supported")
    data = lw.var(node.input[0])
    index_depth = lw.shape(node.input[1])[-1]
    if not isinstance(index_depth, (int, np.integer)):
        raise NotLowerable("ScatterND needs a static last dim of indices")
    axes = list(range(int(index_depth)))
    known: Any = lw.const(node.input[1])
    dims = [data.shape[a] for a in axes]
    if known is not None and all(isinstance(d, (int, np.integer)) for d in dims):
        sizes = np.array([int(d) for d in dims], np.int64)
        indices: Any = np.where(known < 0, known + sizes, known).astype(np.int32)
    else:
        indices = nonnegative_indices(lw, lw.var(node.input[1]), data, axes)
    return [
        lw.mb.scatter_nd(
            data=data,
            indices=indices,
            updates=lw.var(node.input[2]),
            mode=_SCATTER_MODES[reduction],
            name=lw.name(node),
        )
    ]


def lower_scatter_elements(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    reduction = lw.attrs(node).get("reduction", "none")
    if reduction not in _SCATTER_MODES:
        raise NotLowerable(f"ScatterElements reduction {reduction!r} is not supported")
    data = lw.var(node.input[0])
    axis = int(lw.attrs(node).get("axis", 0)) % len(data.shape)
    known: Any = lw.const(node.input[1])
    dim = data.shape[axis]
    if known is not None and is_static_dim(dim):
        indices: Any = np.where(known < 0, known + int(dim), known).astype(np.int32)
    else:
        indices = nonnegative_indices(lw, lw.var(node.input[1]), data, [axis])
    updates = lw.var(node.input[2])
    mode = _SCATTER_MODES[reduction]
    return [
        lw.mb.scatter_along_axis(
            data=data, indices=indices, updates=updates, axis=axis, mode=mode, name=lw.name(node)
        )
    ]


def lower_gather_nd(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    batch_dims = int(lw.attrs(node).get("batch_dims", 0))
    data = lw.var(node.input[0])
    known: Any = lw.const(node.input[1])
    depth = lw.shape(node.input[1])[-1]
    dims = [data.shape[batch_dims + i] for i in range(int(depth))] if is_static_dim(depth) else []
    if known is None or not dims or not all(is_static_dim(d) for d in dims):
        # MIL reads a negative index as out of bounds, and counting it from the end at run time
        # would need a per-column dim: only constant indices are taken
        raise NotLowerable("GatherND indices must be a constant, over static dims")
    sizes = np.array([int(d) for d in dims], np.int64)
    indices = np.where(known < 0, known + sizes, known).astype(np.int32)
    return [lw.mb.gather_nd(x=data, indices=indices, batch_dims=batch_dims, name=lw.name(node))]


def lower_topk(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    k = int(lw.require_const(node, 1, "TopK k").reshape(-1)[0])
    values, indices = lw.mb.topk(
        x=lw.var(node.input[0]),
        k=k,
        axis=int(attrs.get("axis", -1)),
        ascending=not int(attrs.get("largest", 1)),
        # an unsorted TopK may come back in any order: sorted is one of them
        sort=True,
        name=lw.name(node),
    )
    return [values, indices]


def lower_cumsum(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    axis = int(lw.require_const(node, 1, "CumSum axis").reshape(-1)[0])
    return [
        lw.mb.cumsum(
            x=lw.var(node.input[0]),
            axis=axis,
            exclusive=bool(attrs.get("exclusive", 0)),
            reverse=bool(attrs.get("reverse", 0)),
            name=lw.name(node),
        )
    ]


def lower_range(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # Only reached when a bound is known at run time alone: constant ranges are folded.
    start, limit, delta = (lw.var(name) for name in node.input[:3])
    return [lw.mb.range_1d(start=start, end=limit, step=delta, name=lw.name(node))]


def lower_mod(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    a, b = binary_operands(lw, node.input[0], node.input[1])
    if not int(lw.attrs(node).get("fmod", 0)):
        # MIL's mod is x - floor(x / y) * y: the sign of the divisor, as ONNX's fmod=0
        return [lw.mb.mod(x=a, y=b, name=lw.name(node))]
    # fmod=1 is C's fmod (the sign of the dividend): the floored remainder, less the divisor where
    # it is non-zero and its sign differs from the dividend's. No division by hand, so ints stay exact.
    floored = lw.mb.mod(x=a, y=b)
    zero = np.zeros((), lw.types.nptype_from_builtin(floored.dtype))
    signs_differ = lw.mb.logical_xor(x=lw.mb.less(x=floored, y=zero), y=lw.mb.less(x=a, y=zero))
    fix = lw.mb.logical_and(x=signs_differ, y=lw.mb.not_equal(x=floored, y=zero))
    return [lw.mb.select(cond=fix, a=lw.mb.sub(x=floored, y=b), b=floored, name=lw.name(node))]


def lower_trilu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    """Trilu as a select against a constant mask: MIL's band_part keeps a band around the diagonal,
    which cannot drop the diagonals between 0 and k that Trilu's offset k removes."""
    x = lw.var(node.input[0])
    dims = lw.static_dims(node.input[0])
    if len(dims) < 2 or dims[-2] is None or dims[-1] is None:
        raise NotLowerable("Trilu needs static sizes of its last two dims")
    upper = bool(int(lw.attrs(node).get("upper", 1)))
    zero = np.zeros((), lw.types.nptype_from_builtin(x.dtype))
    known = lw.const(node.input[1]) if lw.has(node, 1) else np.zeros((), np.int32)
    if known is None:
        # k known only at run time: each cell's diagonal (column - row) compared with it
        rows, columns = np.arange(dims[-2], dtype=np.int32), np.arange(dims[-1], dtype=np.int32)
        diagonal = columns[None, :] - rows[:, None]
        k_var = lw.mb.reshape(x=lw.var(node.input[1]), shape=[1, 1])
        keep = lw.mb.greater_equal(x=diagonal, y=k_var) if upper else lw.mb.less_equal(x=diagonal, y=k_var)
        return [lw.mb.select(cond=keep, a=x, b=zero, name=lw.name(node))]
    k = int(known.reshape(-1)[0])
    ones = np.ones((dims[-2], dims[-1]), bool)
    mask = np.triu(ones, k) if upper else np.tril(ones, k)
    return [lw.mb.select(cond=mask, a=x, b=zero, name=lw.name(node))]


def lower_depth_to_space(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    block = int(attrs["blocksize"])
    x = lw.var(node.input[0])
    # DCR is TensorFlow's depth_to_space; CRD is PyTorch's pixel_shuffle
    if attrs.get("mode", "DCR") == "CRD":
        return [lw.mb.pixel_shuffle(x=x, upscale_factor=block, name=lw.name(node))]
    return [lw.mb.depth_to_space(x=x, block_size=block, name=lw.name(node))]


def lower_space_to_depth(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    block = int(attrs["blocksize"])
    x = lw.var(node.input[0])
    if attrs.get("mode", "DCR") == "CRD":
        return [lw.mb.pixel_unshuffle(x=x, downscale_factor=np.uint32(block), name=lw.name(node))]
    return [lw.mb.space_to_depth(x=x, block_size=block, name=lw.name(node))]


INDEX_LOWERINGS: dict[str, LowerFn] = {
    "Gather": lower_gather,
    "GatherElements": lower_gather_elements,
    "ScatterND": lower_scatter_nd,
    "ScatterElements": lower_scatter_elements,
    "GatherND": lower_gather_nd,
    "TopK": lower_topk,
    "CumSum": lower_cumsum,
    "Range": lower_range,
    "Mod": lower_mod,
    "Trilu": lower_trilu,
    "DepthToSpace": lower_depth_to_space,
    "SpaceToDepth": lower_space_to_depth,
}
