"""Numpy kernels for the MIL ops that carry no value_inference of their own (conv, pooling, ...)
and for the layout ops whose value_inference reads static shapes (wrong for a dynamic batch).

Every kernel takes the op's inputs by parameter name, fp16 inputs already widened to fp32,
and returns one array per output: the executor rounds each to the output's dtype.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ondevice_farm.runtimes.coreml.compile.kernels_index import INDEX_KERNELS
from ondevice_farm.runtimes.coreml.compile.kernels_quant import QUANT_KERNELS

Args = dict[str, Any]
Kernel = Callable[[Args], list[np.ndarray]]


def _float(value: Any, default: float) -> float:
    return default if value is None else float(value)


def _ints(value: Any, count: int, default: int) -> list[int]:
    if value is None:
        return [default] * count
    return [int(v) for v in np.asarray(value).reshape(-1)]


def window_pads(
    pad_type: str, pad: Any, in_sizes: list[int], kernel: list[int], strides: list[int], dilations: list[int]
) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial dim, as CoreML computes it for each pad_type."""
    spatial = len(kernel)
    if pad_type == "custom":
        flat = _ints(pad, 2 * spatial, 0)
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(spatial)]
    if pad_type == "valid":
        return [(0, 0)] * spatial
    pads = []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations, strict=True):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        pads.append((large, small) if pad_type == "same_lower" else (small, large))
    return pads


def _window(
    offsets: tuple[int, ...], dilations: list[int], strides: list[int], out: list[int]
) -> tuple[slice, ...]:
    window = [
        slice(o * d, o * d + (n - 1) * s + 1, s)
        for o, d, s, n in zip(offsets, dilations, strides, out, strict=True)
    ]
    return (slice(None), slice(None), *window)


def conv(a: Args) -> list[np.ndarray]:
    x, w = a["x"], a["weight"].astype(np.float32)
    spatial = x.ndim - 2
    kernel = list(w.shape[2:])
    strides, dilations = _ints(a.get("strides"), spatial, 1), _ints(a.get("dilations"), spatial, 1)
    groups = int(a.get("groups") or 1)
    pads = window_pads(
        str(a.get("pad_type", "valid")), a.get("pad"), list(x.shape[2:]), kernel, strides, dilations
    )
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    out_sizes = [
        (xp.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(spatial)
    ]
    n, c = x.shape[:2]
    o = w.shape[0]
    cg, og = c // groups, o // groups
    out = np.zeros((n, o, *out_sizes), np.float32)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        patch = xp[_window(offsets, dilations, strides, out_sizes)]
        wk = w[(slice(None), slice(None), *offsets)]
        if groups == 1:
            out += np.moveaxis(np.tensordot(wk, patch, axes=([1], [1])), 0, 1)
        elif cg == 1 and og == 1:
            out += patch * wk.reshape(1, o, *([1] * spatial))
        else:
            grouped = patch.reshape(n, groups, cg, *out_sizes)
            out += np.einsum("ngc...,goc->ngo...", grouped, wk.reshape(groups, og, cg)).reshape(out.shape)
    return [_add_bias(out, a.get("bias"))]


def conv_transpose(a: Args) -> list[np.ndarray]:
    x, w = a["x"], a["weight"].astype(np.float32)
    spatial = x.ndim - 2
    kernel = list(w.shape[2:])
    strides, dilations = _ints(a.get("strides"), spatial, 1), _ints(a.get("dilations"), spatial, 1)
    groups = int(a.get("groups") or 1)
    n, cin = x.shape[:2]
    cin_g, cout_g = cin // groups, w.shape[1]
    in_sizes = list(x.shape[2:])
    full = [(in_sizes[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(spatial)]
    out = np.zeros((n, cout_g * groups, *full), np.float32)
    grouped_x = x.reshape(n, groups, cin_g, *in_sizes)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        wk = w[(slice(None), slice(None), *offsets)].reshape(groups, cin_g, cout_g)
        contribution = np.einsum("ngc...,gco->ngo...", grouped_x, wk).reshape(n, -1, *in_sizes)
        out[_window(offsets, dilations, strides, in_sizes)] += contribution
    pad_type = str(a.get("pad_type", "valid"))
    if pad_type == "custom":
        flat = _ints(a.get("pad"), 2 * spatial, 0)
        crops = [(flat[2 * i], flat[2 * i + 1]) for i in range(spatial)]
    elif pad_type == "valid":
        crops = [(0, 0)] * spatial
    else:
        totals = [f - s * st for f, s, st in zip(full, in_sizes, strides, strict=True)]
        crops = [(t // 2, t - t // 2) if pad_type == "same" else (t - t // 2, t // 2) for t in totals]
    region = tuple(slice(b, f - e) for (b, e), f in zip(crops, full, strict=True))
    out = out[(slice(None), slice(None), *region)]
    target = a.get("output_shape")
    if target is not None:
        sizes = _ints(target, spatial + 2, 0)[2:]
        out = out[(slice(None), slice(None), *(slice(0, s) for s in sizes))]
        short = [(0, max(0, s - have)) for s, have in zip(sizes, out.shape[2:], strict=True)]
        out = np.pad(out, [(0, 0), (0, 0), *short])
    return [_add_bias(out, a.get("bias"))]


def _add_bias(out: np.ndarray, bias: Any) -> np.ndarray:
    if bias is None:
        return out
    return out + np.asarray(bias, np.float32).reshape(1, -1, *([1] * (out.ndim - 2)))


def _pool(a: Args, reduce: str) -> np.ndarray:
    x: np.ndarray = a["x"]
    kernel = _ints(a["kernel_sizes"], 0, 1)
    spatial = len(kernel)
    strides = _ints(a.get("strides"), spatial, 1)
    in_sizes = list(x.shape[-spatial:])
    pads = window_pads(
        str(a.get("pad_type", "valid")), a.get("pad"), in_sizes, kernel, strides, [1] * spatial
    )
    ceil_mode = bool(a.get("ceil_mode") or False)
    out_sizes, extra = [], []
    for size, k, s, (b, e) in zip(in_sizes, kernel, strides, pads, strict=True):
        span = size + b + e - k
        count = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (count - 1) * s >= size + b:
            count -= 1
        out_sizes.append(count)
        extra.append(max(0, (count - 1) * s + k - (size + b + e)))
    lead = [(0, 0)] * (x.ndim - spatial)
    explicit = [(b, e) for b, e in pads]
    padded_by_ceil = [(b, e + ex) for (b, e), ex in zip(pads, extra, strict=True)]
    windows = list(itertools.product(*(range(k) for k in kernel)))

    def slices(offsets: tuple[int, ...]) -> tuple[slice, ...]:
        window = [
            slice(o, o + (n - 1) * s + 1, s) for o, s, n in zip(offsets, strides, out_sizes, strict=True)
        ]
        return (*[slice(None)] * (x.ndim - spatial), *window)

    if reduce == "max":
        xp = np.pad(x, lead + padded_by_ceil, constant_values=-np.inf)
        peak: np.ndarray = np.max(np.stack([xp[slices(o)] for o in windows]), axis=0)
        return peak
    xp = np.pad(x, lead + padded_by_ceil)
    total = np.sum(np.stack([xp[slices(o)] for o in windows]), axis=0, dtype=np.float32)
    ones = np.ones([1] * (x.ndim - spatial) + in_sizes, np.float32)
    if bool(a.get("exclude_padding_from_average") or False):
        counted = np.pad(ones, [(0, 0)] * (x.ndim - spatial) + padded_by_ceil)
    else:
        counted = np.pad(
            np.pad(ones, [(0, 0)] * (x.ndim - spatial) + explicit, constant_values=1.0),
            [(0, 0)] * (x.ndim - spatial) + [(0, ex) for ex in extra],
        )
    counts = np.sum(np.stack([counted[slices(o)] for o in windows]), axis=0)
    mean: np.ndarray = total / np.maximum(counts, 1.0)
    return mean


def max_pool(a: Args) -> list[np.ndarray]:
    return [_pool(a, "max")]


def avg_pool(a: Args) -> list[np.ndarray]:
    return [_pool(a, "avg")]


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    """Broadcast shape of a per-channel (axis 1) vector against x."""
    return (1, -1, *([1] * (x.ndim - 2)))


def _channel_affine(y: np.ndarray, a: Args) -> np.ndarray:
    shape = _channel_shape(y)
    if a.get("gamma") is not None:
        y = y * np.asarray(a["gamma"]).reshape(shape)
    if a.get("beta") is not None:
        y = y + np.asarray(a["beta"]).reshape(shape)
    return y


def batch_norm(a: Args) -> list[np.ndarray]:
    x = a["x"]
    shape = _channel_shape(x)
    eps = _float(a.get("epsilon"), 1e-5)
    mean, var = np.asarray(a["mean"]).reshape(shape), np.asarray(a["variance"]).reshape(shape)
    return [_channel_affine((x - mean) / np.sqrt(var + eps), a)]


def instance_norm(a: Args) -> list[np.ndarray]:
    x = a["x"]
    axes = tuple(range(2, x.ndim))
    eps = _float(a.get("epsilon"), 1e-5)
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return [_channel_affine(y, a)]


def upsample_nearest_neighbor(a: Args) -> list[np.ndarray]:
    x = a["x"]
    for axis, key in ((-2, "scale_factor_height"), (-1, "scale_factor_width")):
        scale = float(a.get(key) or 1)
        size = x.shape[axis]
        index = np.minimum(np.floor(np.arange(int(size * scale)) / scale).astype(np.int64), size - 1)
        x = np.take(x, index, axis=axis)
    return [x]


def upsample_bilinear(a: Args) -> list[np.ndarray]:
    x = a["x"]
    align = bool(a.get("align_corners") if a.get("align_corners") is not None else True)
    half = a.get("half_pixel_centers")
    half_pixel = (not align) if half is None else bool(half)
    for axis, key in ((-2, "scale_factor_height"), (-1, "scale_factor_width")):
        size = x.shape[axis]
        out = math.floor(size * float(a.get(key) or 1))
        i = np.arange(out, dtype=np.float64)
        if align:
            grid = i * ((size - 1) / (out - 1)) if out > 1 else np.zeros_like(i)
        elif half_pixel:
            grid = (i + 0.5) * (size / out) - 0.5
        else:
            grid = i * (size / out)
        grid = np.clip(grid, 0, size - 1)
        low = np.floor(grid).astype(np.int64)
        high = np.minimum(low + 1, size - 1)
        frac_shape = [1] * x.ndim
        frac_shape[axis] = out
        frac = (grid - low).astype(np.float32).reshape(frac_shape)
        x = np.take(x, low, axis=axis) * (1 - frac) + np.take(x, high, axis=axis) * frac
    return [x]


def silu(a: Args) -> list[np.ndarray]:
    x = a["x"]
    return [x / (1.0 + np.exp(-x))]


def shape(a: Args) -> list[np.ndarray]:
    return [np.array(a["x"].shape, np.int32)]


def reshape(a: Args) -> list[np.ndarray]:
    return [a["x"].reshape([int(s) for s in np.asarray(a["shape"]).reshape(-1)])]


def slice_by_index(a: Args) -> list[np.ndarray]:
    x = a["x"]
    rank = x.ndim
    begin, end = _ints(a.get("begin"), rank, 0), _ints(a.get("end"), rank, 0)
    stride = _ints(a.get("stride"), rank, 1)
    masks = {
        k: [bool(v) for v in np.asarray(a[k]).reshape(-1)] if a.get(k) is not None else [False] * rank
        for k in ("begin_mask", "end_mask", "squeeze_mask")
    }
    index: list[Any] = []
    for i in range(rank):
        if masks["squeeze_mask"][i]:
            index.append(begin[i])
            continue
        index.append(
            slice(
                None if masks["begin_mask"][i] else begin[i],
                None if masks["end_mask"][i] else end[i],
                stride[i],
            )
        )
    return [np.asarray(x[tuple(index)])]


def concat(a: Args) -> list[np.ndarray]:
    return [np.concatenate([np.asarray(v) for v in a["values"]], axis=int(a["axis"]))]


def split(a: Args) -> list[np.ndarray]:
    x, axis = a["x"], int(a["axis"])
    if a.get("split_sizes") is not None:
        cuts = np.cumsum(_ints(a["split_sizes"], 0, 0))[:-1]
        return list(np.split(x, cuts, axis=axis))
    return list(np.split(x, int(a["num_splits"]), axis=axis))


def squeeze(a: Args) -> list[np.ndarray]:
    x = a["x"]
    axes = a.get("axes")
    if axes is None:
        return [np.squeeze(x)]
    return [np.squeeze(x, axis=tuple(int(v) % x.ndim for v in np.asarray(axes).reshape(-1)))]


def expand_dims(a: Args) -> list[np.ndarray]:
    x = a["x"]
    axes = [int(v) for v in np.asarray(a["axes"]).reshape(-1)]
    out_rank = x.ndim + len(axes)
    return [np.expand_dims(x, tuple(sorted(v % out_rank for v in axes)))]


def tile(a: Args) -> list[np.ndarray]:
    return [np.tile(a["x"], _ints(a["reps"], 0, 1))]


def fill(a: Args) -> list[np.ndarray]:
    return [np.full(_ints(a["shape"], 0, 0), a.get("value") or 0.0)]


def depth_to_space(a: Args) -> list[np.ndarray]:
    # DCR: the block offsets are the outer part of the channel index
    x, b = a["x"], int(a["block_size"])
    n, c, h, w = x.shape
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return [y.reshape(n, c // (b * b), h * b, w * b)]


def pixel_shuffle(a: Args) -> list[np.ndarray]:
    # CRD: the block offsets are the inner part of the channel index
    x, b = a["x"], int(a["upscale_factor"])
    n, c, h, w = x.shape
    y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (b * b), h * b, w * b)]


def space_to_depth(a: Args) -> list[np.ndarray]:
    x, b = a["x"], int(a["block_size"])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b)]


def pixel_unshuffle(a: Args) -> list[np.ndarray]:
    x, b = a["x"], int(a["downscale_factor"])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 1, 3, 5, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b)]


def cumsum(a: Args) -> list[np.ndarray]:
    x, axis = a["x"], int(a.get("axis") or 0)
    if bool(a.get("reverse") or False):
        x = np.flip(x, axis=axis)
    total = np.cumsum(x, axis=axis)
    if bool(a.get("exclusive") or False):
        total = total - x
    return [np.flip(total, axis=axis) if bool(a.get("reverse") or False) else total]


KERNELS: dict[str, Kernel] = {
    "conv": conv,
    "conv_transpose": conv_transpose,
    "max_pool": max_pool,
    "avg_pool": avg_pool,
    "batch_norm": batch_norm,
    "instance_norm": instance_norm,
    "upsample_nearest_neighbor": upsample_nearest_neighbor,
    "upsample_bilinear": upsample_bilinear,
    "silu": silu,
    "shape": shape,
    "reshape": reshape,
    "slice_by_index": slice_by_index,
    "concat": concat,
    "split": split,
    "squeeze": squeeze,
    "expand_dims": expand_dims,
    "tile": tile,
    "fill": fill,
    "depth_to_space": depth_to_space,
    "pixel_shuffle": pixel_shuffle,
    "space_to_depth": space_to_depth,
    "pixel_unshuffle": pixel_unshuffle,
    "cumsum": cumsum,
    **INDEX_KERNELS,
    **QUANT_KERNELS,
}
