"""Numpy kernels for MIL's scatter ops, which carry no value_inference of their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Args = dict[str, Any]


def scatter_nd(a: Args) -> list[np.ndarray]:
    data, indices, updates = np.array(a["data"]), np.asarray(a["indices"]), np.asarray(a["updates"])
    mode = str(a.get("mode") or "add")
    depth = indices.shape[-1]
    points = indices.reshape(-1, depth)
    slabs = updates.reshape(len(points), *data.shape[depth:])
    combine: dict[str, Callable[[Any, Any], Any]] = {
        "update": lambda old, new: new,
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "div": np.divide,
        "max": np.maximum,
        "min": np.minimum,
    }
    for point, slab in zip(points, slabs, strict=True):
        where = tuple(int(i) for i in point)
        data[where] = combine[mode](data[where], slab)
    return [data]


INDEX_KERNELS = {"scatter_nd": scatter_nd}
