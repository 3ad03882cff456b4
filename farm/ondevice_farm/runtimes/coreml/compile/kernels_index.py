"""Numpy kernels for MIL's scatter/gather ops (and local_response_norm) where coremltools carries no
value_inference, or one that ignores the op's mode (scatter_along_axis always overwrites)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Args = dict[str, Any]


_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "update": lambda old, new: new,
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}


def scatter_along_axis(a: Args) -> list[np.ndarray]:
    data, indices, updates = np.array(a["data"]), np.asarray(a["indices"]), np.asarray(a["updates"])
    axis = int(a.get("axis") or 0) % data.ndim
    combine = _COMBINE[str(a.get("mode") or "add")]
    # one element at a time, in order: repeated indices combine as ONNX's reduction says
    for where in np.ndindex(*indices.shape):
        target = list(where)
        target[axis] = int(indices[where])
        data[tuple(target)] = combine(data[tuple(target)], updates[where])
    return [data]


def gather_nd(a: Args) -> list[np.ndarray]:
    x, indices = np.asarray(a["x"]), np.asarray(a["indices"])
    batch = int(a.get("batch_dims") or 0)
    depth = indices.shape[-1]
    flat_x = x.reshape(-1, *x.shape[batch:])
    flat_i = indices.reshape(-1, *indices.shape[batch:])
    picked = [xs[tuple(np.moveaxis(ix, -1, 0))] for xs, ix in zip(flat_x, flat_i, strict=True)]
    return [np.stack(picked).reshape(*indices.shape[:-1], *x.shape[batch + depth :])]


def local_response_norm(a: Args) -> list[np.ndarray]:
    x = np.asarray(a["x"], np.float64)
    size = int(a["size"])
    alpha, beta, k = (float(a[name]) if a.get(name) is not None else d for name, d in _LRN_DEFAULTS)
    squares = x * x
    total = np.zeros_like(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    for c in range(x.shape[1]):  # the window over channels, cut at the edges
        total[:, c] = squares[:, max(0, c - before) : c + after + 1].sum(axis=1)
    return [(x / (k + alpha / size * total) ** beta).astype(np.float32)]


_LRN_DEFAULTS = (("alpha", 1e-4), ("beta", 0.75), ("k", 1.0))


def scatter_nd(a: Args) -> list[np.ndarray]:
    data, indices, updates = np.array(a["data"]), np.asarray(a["indices"]), np.asarray(a["updates"])
    mode = str(a.get("mode") or "add")
    depth = indices.shape[-1]
    points = indices.reshape(-1, depth)
    slabs = updates.reshape(len(points), *data.shape[depth:])
    combine = _COMBINE
    for point, slab in zip(points, slabs, strict=True):
        where = tuple(int(i) for i in point)
        data[where] = combine[mode](data[where], slab)
    return [data]


INDEX_KERNELS = {
    "scatter_nd": scatter_nd,
    "scatter_along_axis": scatter_along_axis,
    "gather_nd": gather_nd,
    "local_response_norm": local_response_norm,
}
