"""Pooling MIL's `max_pool`/`avg_pool` cannot hold, spelt out window offset by window offset:
dilated MaxPool/AveragePool, and MaxPool's `Indices` output.

For each offset inside the kernel the input (padded) is sliced with the pooling stride; the
slices are combined with `maximum` (tracking the first index of the maximum with `greater` and
`select`, as ONNX Runtime scans a window) or summed and divided by the count of the window's
cells that count (`count_include_pad`). One slice per kernel cell: the program grows with the
kernel's volume, so spatial dims must be static and the kernel at most `DEFAULT_MAX_WINDOW_CELLS`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import Lowering, NotLowerable

#: the most kernel cells spelt out (each is one slice and one or three elementwise ops)
DEFAULT_MAX_WINDOW_CELLS = 343


@dataclass(frozen=True)
class Window:
    """The geometry of one pooling node over a static input."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    #: (begin, end) padding per spatial dim, the end including what ceil_mode adds
    pads: list[tuple[int, int]]
    #: (begin, end) of the padding ONNX asked for (what count_include_pad counts)
    explicit: list[tuple[int, int]]
    in_sizes: list[int]
    out_sizes: list[int]


def pool_window(attrs: dict[str, Any], in_sizes: list[int]) -> Window:
    """Output sizes and padding as ONNX's reference computes them (the last window of ceil_mode
    starts inside the input or its begin padding)."""
    kernel = [int(k) for k in attrs["kernel_shape"]]
    spatial = len(kernel)
    strides = [int(s) for s in attrs.get("strides", [1] * spatial)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * spatial)]
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        explicit = []
        for size, s, span in zip(in_sizes, strides, spans, strict=True):
            total = max((math.ceil(size / s) - 1) * s + span - size, 0)
            small, large = total // 2, total - total // 2
            explicit.append((large, small) if auto_pad == "SAME_LOWER" else (small, large))
    elif auto_pad == "VALID":
        explicit = [(0, 0)] * spatial
    else:
        flat = [int(p) for p in attrs.get("pads", [0] * (2 * spatial))]
        explicit = [(flat[i], flat[i + spatial]) for i in range(spatial)]
    ceil_mode = bool(int(attrs.get("ceil_mode", 0)))
    out_sizes, pads = [], []
    for size, s, span, (begin, end) in zip(in_sizes, strides, spans, explicit, strict=True):
        exact = (size + begin + end - span) / s + 1
        count = math.ceil(exact) if ceil_mode else math.floor(exact)
        if ceil_mode and (count - 1) * s >= size + begin:
            count -= 1
        if count < 1:
            raise NotLowerable(f"pooling window of {span} does not fit an input of {size}")
        out_sizes.append(count)
        pads.append((begin, max(end, (count - 1) * s + span - size - begin)))
    return Window(kernel, strides, dilations, pads, explicit, list(in_sizes), out_sizes)


def _slices(lw: Lowering, x: Any, window: Window, rank: int) -> list[tuple[tuple[int, ...], Any]]:
    """(offset, the input cells that offset of every window reads) for each kernel cell."""
    spatial = len(window.kernel)
    found = []
    for offset in itertools.product(*(range(k) for k in window.kernel)):
        begin = [0] * (rank - spatial) + [o * d for o, d in zip(offset, window.dilations, strict=True)]
        end = [0] * (rank - spatial) + [
            b + (n - 1) * s + 1
            for b, n, s in zip(begin[rank - spatial :], window.out_sizes, window.strides, strict=True)
        ]
        stride = [1] * (rank - spatial) + window.strides
        mask = [True] * (rank - spatial) + [False] * spatial
        sliced = lw.mb.slice_by_index(
            x=x, begin=begin, end=end, stride=stride, begin_mask=mask, end_mask=mask
        )
        found.append((offset, sliced))
    return found


def _padded(lw: Lowering, x: Any, window: Window, rank: int, value: float) -> Any:
    if not any(b or e for b, e in window.pads):
        return x
    flat = [0] * (2 * (rank - len(window.pads))) + [v for pair in window.pads for v in pair]
    return lw.mb.pad(x=x, pad=np.array(flat, np.int32), mode="constant", constant_val=np.float32(value))


def _cells(window: Window, offset: tuple[int, ...], *, counted_pads: bool) -> np.ndarray:
    """Per output position, whether the cell at `offset` of its window counts: inside the input,
    or inside the padding ONNX asked for where `counted_pads`."""
    axes = []
    for i, (o, d, s, n) in enumerate(
        zip(offset, window.dilations, window.strides, window.out_sizes, strict=True)
    ):
        position = np.arange(n) * s + o * d - window.pads[i][0]
        low, high = (
            (-window.explicit[i][0], window.in_sizes[i] + window.explicit[i][1])
            if counted_pads
            else (
                0,
                window.in_sizes[i],
            )
        )
        axes.append((position >= low) & (position < high))
    inside = axes[0]
    for axis in axes[1:]:
        inside = np.multiply.outer(inside, axis)
    return np.asarray(inside, bool)


def _flat_index(window: Window, offset: tuple[int, ...], lead: list[int], column_major: bool) -> np.ndarray:
    """The ONNX Indices value of the cell at `offset` of every window: its flat position in x."""
    spatial = len(window.kernel)
    coords = [
        np.arange(n) * s + o * d - window.pads[i][0]
        for i, (o, d, s, n) in enumerate(
            zip(offset, window.dilations, window.strides, window.out_sizes, strict=True)
        )
    ]
    grids = np.meshgrid(*coords, indexing="ij")
    order = list(range(spatial))[::-1] if column_major else list(range(spatial))
    spatial_index = np.zeros(window.out_sizes, np.int64)
    for axis in order:
        spatial_index = spatial_index * window.in_sizes[axis] + grids[axis]
    plane = math.prod(window.in_sizes)
    base = np.arange(math.prod(lead), dtype=np.int64).reshape(lead + [1] * spatial) * plane
    return (base + spatial_index).astype(np.int32)


def _window_of(lw: Lowering, node: onnx.NodeProto) -> tuple[Window, list[int]]:
    attrs = lw.attrs(node)
    dims = lw.static_dims(node.input[0])
    spatial = len(attrs["kernel_shape"])
    if any(d is None for d in dims[-spatial:]):
        raise NotLowerable(f"dilated {node.op_type} or its Indices needs static spatial dims (use --shape)")
    if math.prod(int(k) for k in attrs["kernel_shape"]) > DEFAULT_MAX_WINDOW_CELLS:
        raise NotLowerable(f"a kernel over {DEFAULT_MAX_WINDOW_CELLS} cells is not spelt out")
    return pool_window(attrs, [int(d) for d in dims[-spatial:] if d is not None]), [
        d if d is not None else -1 for d in dims[:-spatial]
    ]


def lower_windowed_max_pool(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    window, lead = _window_of(lw, node)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    with_indices = len(node.output) > 1 and node.output[1] != ""
    if with_indices and any(d < 0 for d in lead):
        raise NotLowerable("the MaxPool Indices output needs a static batch and channel count")
    column_major = bool(int(lw.attrs(node).get("storage_order", 0)))
    cells = _slices(lw, _padded(lw, x, window, rank, -np.inf), window, rank)
    peak, index = cells[0][1], None
    if with_indices:
        index = _flat_index(window, cells[0][0], lead, column_major)
    for offset, cell in cells[1:]:
        if with_indices:
            # strictly greater: the first maximum in scan order keeps its index, as ONNX Runtime's
            index = lw.mb.select(
                cond=lw.mb.greater(x=cell, y=peak), a=_flat_index(window, offset, lead, column_major), b=index
            )
        peak = lw.mb.maximum(x=peak, y=cell)
    results = [lw.mb.identity(x=peak, name=lw.name(node))]
    if with_indices:
        index_var = lw.mb.const(val=index) if isinstance(index, np.ndarray) else index
        results.append(lw.mb.identity(x=index_var, name=lw.name(node, 1)))
    return results


def lower_windowed_avg_pool(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    window, _ = _window_of(lw, node)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    counted_pads = bool(int(lw.attrs(node).get("count_include_pad", 0)))
    cells = _slices(lw, _padded(lw, x, window, rank, 0.0), window, rank)
    total = cells[0][1]
    for _, cell in cells[1:]:
        total = lw.mb.add(x=total, y=cell)
    counts = sum(_cells(window, offset, counted_pads=counted_pads).astype(np.float32) for offset, _ in cells)
    scale = (1.0 / np.maximum(np.asarray(counts, np.float32), 1.0)).astype(np.float32)
    dtype = lw.types.nptype_from_builtin(x.dtype)
    return [
        lw.mb.mul(
            x=total,
            y=scale.reshape([1] * (rank - len(window.kernel)) + window.out_sizes).astype(dtype),
            name=lw.name(node),
        )
    ]
