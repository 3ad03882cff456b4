"""ONNX shape and layout ops (Reshape, Slice, Gather, Pad, reductions, ...) -> MIL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable

_INT32_MAX = int(np.iinfo(np.int32).max)
_INT32_MIN = int(np.iinfo(np.int32).min)


def _is_static(dim: Any) -> bool:
    return isinstance(dim, (int, np.integer))


def axes_input(lw: Lowering, node: onnx.NodeProto, input_index: int) -> list[int] | None:
    """Axes given as an input (opset 13+/18+) or, in older opsets, as an attribute."""
    if lw.has(node, input_index):
        return [int(a) for a in lw.require_const(node, input_index, f"{node.op_type} axes").reshape(-1)]
    axes = lw.attrs(node).get("axes")
    return None if axes is None else [int(a) for a in axes]


def _dynamic_shape(lw: Lowering, x: Any, dims: list[Any]) -> Any:
    """A shape tensor where symbolic dims are read from x at run time (by their index in x)."""
    pieces: list[Any] = []
    shape = lw.mb.shape(x=x)
    for dim in dims:
        if isinstance(dim, tuple):  # ("copy", index)
            pieces.append(lw.mb.gather(x=shape, indices=np.array([dim[1]], np.int32), axis=0))
        else:
            pieces.append(np.array([dim], np.int32))
    return lw.mb.concat(values=pieces, axis=0)


def lower_reshape(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    shape = lw.const(node.input[1])
    if shape is None:
        return [lw.mb.reshape(x=x, shape=lw.var(node.input[1]), name=lw.name(node))]
    allow_zero = bool(lw.attrs(node).get("allowzero", 0))
    in_dims = list(x.shape)
    dims: list[Any] = []
    for i, size in enumerate(int(s) for s in shape.reshape(-1)):
        if size == 0 and not allow_zero:
            dims.append(int(in_dims[i]) if _is_static(in_dims[i]) else ("copy", i))
        else:
            dims.append(size)
    copies = [d for d in dims if isinstance(d, tuple)]
    if not copies and 0 in dims and -1 not in dims:
        # an empty result (allowzero keeps a 0): no values to move, a constant of its shape
        return [np.zeros(dims, lw.types.nptype_from_builtin(x.dtype))]
    if not copies:
        return [lw.mb.reshape(x=x, shape=np.array(dims, np.int32), name=lw.name(node))]
    if len(copies) == 1 and -1 not in dims:
        static = [-1 if isinstance(d, tuple) else d for d in dims]
        return [lw.mb.reshape(x=x, shape=np.array(static, np.int32), name=lw.name(node))]
    return [lw.mb.reshape(x=x, shape=_dynamic_shape(lw, x, dims), name=lw.name(node))]


def lower_transpose(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    perm = lw.attrs(node).get("perm")
    perm = list(reversed(range(len(x.shape)))) if perm is None else [int(p) for p in perm]
    return [lw.mb.transpose(x=x, perm=perm, name=lw.name(node))]


def lower_flatten(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    dims = list(x.shape)
    axis = int(lw.attrs(node).get("axis", 1))
    axis = axis + len(dims) if axis < 0 else axis
    before, after = dims[:axis], dims[axis:]
    if all(_is_static(d) for d in after):
        new = [-1 if before else 1, int(np.prod(after, dtype=np.int64))]
    elif all(_is_static(d) for d in before):
        new = [int(np.prod(before, dtype=np.int64)), -1]
    else:
        raise NotLowerable("Flatten with unknown dims on both sides of the axis")
    return [lw.mb.reshape(x=x, shape=np.array(new, np.int32), name=lw.name(node))]


def lower_squeeze(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    axes = axes_input(lw, node, 1)
    if axes is None:
        if not all(_is_static(d) for d in x.shape):
            raise NotLowerable("Squeeze without axes needs a static input shape")
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    return [lw.mb.squeeze(x=x, axes=[a % len(x.shape) for a in axes], name=lw.name(node))]


def lower_unsqueeze(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    axes = axes_input(lw, node, 1) or []
    out_rank = len(x.shape) + len(axes)
    return [lw.mb.expand_dims(x=x, axes=sorted(a % out_rank for a in axes), name=lw.name(node))]


def lower_concat(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    axis = int(lw.attrs(node)["axis"])
    values = [lw.value(n) for n in node.input if n]
    if all(isinstance(v, np.ndarray) for v in values):
        return [np.concatenate(values, axis=axis)]
    dtype = next(v for v in values if not isinstance(v, np.ndarray)).dtype
    np_type = lw.types.nptype_from_builtin(dtype)
    # ONNX lets empty tensors take part in a Concat; MIL does not.
    parts = [v.astype(np_type) if isinstance(v, np.ndarray) else v for v in values if not _is_empty(v)]
    if len(parts) == 1:
        return [lw.mb.identity(x=parts[0], name=lw.name(node))]
    return [lw.mb.concat(values=parts, axis=axis, name=lw.name(node))]


def _is_empty(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.size == 0


def lower_split(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    axis = int(attrs.get("axis", 0))
    x = lw.var(node.input[0])
    sizes = lw.require_const(node, 1, "Split sizes") if lw.has(node, 1) else attrs.get("split")
    name = lw.name(node)
    if sizes is not None:
        parts = lw.mb.split(x=x, split_sizes=np.array(sizes, np.int32).reshape(-1), axis=axis, name=name)
    else:
        count = int(attrs.get("num_outputs", len(node.output)))
        dim = x.shape[axis]
        if _is_static(dim) and int(dim) % count:
            # opset 18: the last chunk is smaller when the axis does not divide evenly
            chunk = -(-int(dim) // count)
            sizes = [chunk] * (count - 1) + [int(dim) - chunk * (count - 1)]
            parts = lw.mb.split(x=x, split_sizes=np.array(sizes, np.int32), axis=axis, name=name)
        else:
            parts = lw.mb.split(x=x, num_splits=count, axis=axis, name=name)
    return list(parts) if isinstance(parts, (list, tuple)) else [parts]


def lower_slice(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    rank = len(x.shape)
    starts = [int(v) for v in lw.require_const(node, 1, "Slice starts").reshape(-1)]
    ends = [int(v) for v in lw.require_const(node, 2, "Slice ends").reshape(-1)]
    axes = axes_input(lw, node, 3) or list(range(len(starts)))
    steps = (
        [int(v) for v in lw.require_const(node, 4, "Slice steps").reshape(-1)] if lw.has(node, 4) else None
    )
    steps = steps or [1] * len(starts)
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    begin_mask, end_mask = [True] * rank, [True] * rank
    empty = False
    for start, stop, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis %= rank
        dim = x.shape[axis]
        stride[axis] = step
        bounds = _slice_bounds(start, stop, step, int(dim) if _is_static(dim) else None)
        if bounds is None:
            empty = True
            continue
        begin[axis], end[axis], begin_mask[axis], end_mask[axis] = bounds
    if empty:
        return [_empty_slice(lw, node, x, starts, ends, axes, steps)]
    return [
        lw.mb.slice_by_index(
            x=x,
            begin=np.array(begin, np.int32),
            end=np.array(end, np.int32),
            stride=np.array(stride, np.int32),
            begin_mask=begin_mask,
            end_mask=end_mask,
            name=lw.name(node),
        )
    ]


def _slice_bounds(start: int, stop: int, step: int, dim: int | None) -> tuple[int, int, bool, bool] | None:
    """ONNX slice bounds -> MIL (begin, end, begin_mask, end_mask), None where the slice is empty.

    With a static dim, the indices are those Python's slicing picks, as onnx.reference has them:
    a negative step from a start below -dim selects nothing (ONNX Runtime 1.2x returns element 0
    there; the reference implementation is the oracle here). MIL's -1 is the last element, so
    "past the front" becomes a mask.
    """
    if dim is not None:
        picked = range(dim)[slice(start, stop, step)]
        if len(picked) == 0:
            return None
        if step > 0:
            return picked[0], picked[-1] + 1, False, False
        last = picked[-1] - 1
        return picked[0], max(last, 0), False, last < 0
    if step > 0:
        return (max(start, _INT32_MIN), min(stop, _INT32_MAX), start <= _INT32_MIN, stop >= _INT32_MAX)
    return (min(start, _INT32_MAX), max(stop, _INT32_MIN), start >= _INT32_MAX, stop <= _INT32_MIN)


def _empty_slice(
    lw: Lowering,
    node: onnx.NodeProto,
    x: Any,
    starts: list[int],
    ends: list[int],
    axes: list[int],
    steps: list[int],
) -> np.ndarray:
    """An empty Slice result, as a constant: an ML Program holds no empty tensors, but a Concat
    that takes it drops it."""
    dims = lw.static_dims(node.input[0])
    if any(d is None for d in dims):
        raise NotLowerable("Slice selects nothing along an axis of a tensor with free dims")
    shape = [int(d) for d in dims if d is not None]
    index = [slice(None)] * len(shape)
    for start, stop, axis, step in zip(starts, ends, axes, steps, strict=True):
        index[axis % len(shape)] = slice(start, stop, step)
    np_type = lw.types.nptype_from_builtin(x.dtype)
    return np.zeros(shape, np_type)[tuple(index)]


def lower_shape(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    attrs = lw.attrs(node)
    start, end = attrs.get("start"), attrs.get("end")
    if all(_is_static(d) for d in x.shape):
        return [np.array(x.shape, np.int32)[start:end]]
    shape = lw.mb.shape(x=x)
    if start is None and end is None:
        return [lw.mb.identity(x=shape, name=lw.name(node))]
    rank = len(x.shape)
    b = int(start or 0) + (rank if int(start or 0) < 0 else 0)
    e = rank if end is None else int(end) + (rank if int(end) < 0 else 0)
    b, e = min(max(b, 0), rank), min(max(e, 0), rank)
    return [lw.mb.slice_by_index(x=shape, begin=[b], end=[e], name=lw.name(node))]


def lower_pad(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    pads = [int(p) for p in (lw.require_const(node, 1, "Pad pads") if lw.has(node, 1) else attrs["pads"])]
    value = lw.const(node.input[2]) if lw.has(node, 2) else None
    axes = axes_input(lw, node, 3) or list(range(rank))
    axes = [a % rank for a in axes]
    pairs = [[0, 0] for _ in range(rank)]
    for i, axis in enumerate(axes):
        pairs[axis] = [pads[i], pads[i + len(axes)]]
    modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}
    mode = attrs.get("mode", "constant")
    if mode == "wrap":
        return [_pad_by_gather(lw, node, x, pairs, mode)]
    if mode not in modes:
        raise NotLowerable(f"Pad mode {mode!r} is not supported")
    if any(p < 0 for pair in pairs for p in pair):
        if mode != "constant":
            raise NotLowerable(f"negative pads are supported in constant mode only, not {mode!r}")
        # a negative pad removes elements (as ONNX Runtime does; onnx.reference has no negative pads)
        x = _crop(lw, x, [[max(0, -p) for p in pair] for pair in pairs])
        pairs = [[max(0, p) for p in pair] for pair in pairs]
        if not any(p for pair in pairs for p in pair):
            return [lw.mb.identity(x=x, name=lw.name(node))]
    if mode != "constant":
        # CoreML pads reflect/replicate only on the innermost dims: drop the outer unpadded ones.
        while pairs and pairs[0] == [0, 0]:
            pairs.pop(0)
    flat = np.array([p for pair in pairs for p in pair], np.int32)
    constant = value.reshape(-1)[0] if value is not None and value.size else 0
    np_type = lw.types.nptype_from_builtin(x.dtype)
    if mode != "constant" and lw.dtype_of(node.input[0]) not in ("fp32", "fp16"):
        # MIL's pad takes floats only: an integer tensor reflects or replicates by gathers
        return [_pad_by_gather(lw, node, x, [[0, 0]] * (rank - len(pairs)) + pairs, mode)]
    return [lw.mb.pad(x=x, pad=flat, mode=modes[mode], constant_val=np_type(constant), name=lw.name(node))]


def _pad_by_gather(lw: Lowering, node: onnx.NodeProto, x: Any, pairs: list[list[int]], mode: str) -> Any:
    """Pad as one gather per padded axis, of the source index each output position reads:
    wrap (modulo), reflect (mirrored without the edge) or edge (clamped). Needs static dims."""
    dims = lw.static_dims(node.input[0])
    padded = [axis for axis, pair in enumerate(pairs) if pair != [0, 0]]
    if any(dims[axis] is None for axis in padded):
        raise NotLowerable(f"Pad mode {mode!r} on a free dim is not supported")
    for axis in padded:
        size = int(dims[axis] or 0)
        position = np.arange(-pairs[axis][0], size + pairs[axis][1])
        if mode == "wrap":
            index = position % size
        elif mode == "edge":
            index = np.clip(position, 0, size - 1)
        else:
            period = max(2 * size - 2, 1)
            index = position % period
            index = np.where(index >= size, period - index, index)
        x = lw.mb.gather(x=x, indices=index.astype(np.int32), axis=axis)
    return lw.mb.identity(x=x, name=lw.name(node))


def _crop(lw: Lowering, x: Any, crops: list[list[int]]) -> Any:
    """x without `crops[axis] = [front, back]` elements at each end of each axis."""
    rank = len(crops)
    return lw.mb.slice_by_index(
        x=x,
        begin=np.array([front for front, _ in crops], np.int32),
        end=np.array([-back if back else 0 for _, back in crops], np.int32),
        end_mask=[back == 0 for _, back in crops],
        stride=np.ones(rank, np.int32),
    )


def lower_expand(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    known = lw.const(node.input[1])
    if known is None:
        # a shape read from a free dim at run time: broadcast against zeros of that shape
        np_type = lw.types.nptype_from_builtin(x.dtype)
        if np_type == np.bool_:
            raise NotLowerable("Expand of a boolean tensor to a run-time shape")
        zeros = lw.mb.fill(shape=lw.var(node.input[1]), value=np_type(0).item())
        return [lw.mb.add(x=x, y=zeros, name=lw.name(node))]
    shape = [int(s) for s in known.reshape(-1)]
    dims = list(x.shape)
    if all(_is_static(d) for d in dims):
        target = list(np.broadcast_shapes(tuple(int(d) for d in dims), tuple(shape)))
        if len(target) > len(dims):
            x = lw.mb.expand_dims(x=x, axes=list(range(len(target) - len(dims))))
            dims = [1] * (len(target) - len(dims)) + dims
        reps = [t // int(d) for t, d in zip(target, dims, strict=True)]
        if all(r == 1 for r in reps):
            return [lw.mb.identity(x=x, name=lw.name(node))]
        return [lw.mb.tile(x=x, reps=reps, name=lw.name(node))]
    # Unknown input dims: broadcasting against a tensor of the target shape does the expansion.
    np_type = lw.types.nptype_from_builtin(x.dtype)
    if np_type == np.bool_:
        raise NotLowerable("Expand of a boolean tensor with unknown dims")
    return [lw.mb.add(x=x, y=np.zeros(shape, np_type), name=lw.name(node))]


def lower_tile(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    reps = [int(r) for r in lw.require_const(node, 1, "Tile repeats").reshape(-1)]
    return [lw.mb.tile(x=lw.var(node.input[0]), reps=reps, name=lw.name(node))]


def lower_constant_of_shape(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # Only reached when the shape is known at run time alone (a free dim): constant ones are folded.
    value = lw.attrs(node).get("value")
    fill = np.asarray(value).reshape(-1)[0] if value is not None else np.float32(0.0)
    fill = np.asarray(fill).astype(np.int32) if np.asarray(fill).dtype.kind in "iu" else np.asarray(fill)
    shape = lw.var(node.input[0])
    return [lw.mb.fill(shape=shape, value=fill.item(), name=lw.name(node))]


def _arg_reduce(mil_op: str) -> LowerFn:
    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        attrs = lw.attrs(node)
        x = lw.var(node.input[0])
        axis = int(attrs.get("axis", 0)) % max(len(x.shape), 1)
        keep_dims = bool(attrs.get("keepdims", 1))
        if not int(attrs.get("select_last_index", 0)):
            return [getattr(lw.mb, mil_op)(x=x, axis=axis, keep_dims=keep_dims, name=lw.name(node))]
        # MIL returns the first of equal extremes: search the reversed axis, then count from the end
        found = getattr(lw.mb, mil_op)(x=lw.mb.reverse(x=x, axes=[axis]), axis=axis, keep_dims=keep_dims)
        size = x.shape[axis]
        last: Any = (
            np.int32(int(size) - 1)
            if isinstance(size, (int, np.integer))
            else lw.mb.sub(x=lw.mb.gather(x=lw.mb.shape(x=x), indices=axis, axis=0), y=np.int32(1))
        )
        return [lw.mb.sub(x=last, y=found, name=lw.name(node))]

    lower.__name__ = f"lower_{mil_op}"
    return lower


def lower_constant(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            return [np.asarray(attrs[key])]
    raise NotLowerable("only dense Constant values are supported")


TENSOR_LOWERINGS: dict[str, LowerFn] = {
    "Reshape": lower_reshape,
    "Transpose": lower_transpose,
    "Flatten": lower_flatten,
    "Squeeze": lower_squeeze,
    "Unsqueeze": lower_unsqueeze,
    "Concat": lower_concat,
    "Split": lower_split,
    "Slice": lower_slice,
    "Shape": lower_shape,
    "Pad": lower_pad,
    "Expand": lower_expand,
    "Tile": lower_tile,
    "Constant": lower_constant,
    "ConstantOfShape": lower_constant_of_shape,
    "ArgMax": _arg_reduce("reduce_argmax"),
    "ArgMin": _arg_reduce("reduce_argmin"),
}
