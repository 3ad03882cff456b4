"""ONNX Resize that MIL's upsample ops cannot hold, as one interpolation matrix per resized axis.

Every mode of Resize (nearest with each `nearest_mode`, linear, cubic with `cubic_coeff_a` and
`exclude_outside`, antialiased downsampling) is linear in its input and separable by axis: the
output along an axis of size n -> m is `M @ x` for an (m, n) matrix that depends only on the
attributes and the sizes. The matrix is built here with ONNX's formulas (coordinate transform,
then the taps and their weights, edge taps clamped as ONNX's reference pads), and the program
applies it with one `matmul` per axis. `tf_crop_and_resize` adds `extrapolation_value` where an
output falls outside the crop. This covers any scale (whole output size or not) and any axis;
the price is the matrix constants (m x n per axis), so dims must be static and each matrix at
most `DEFAULT_MAX_MATRIX_CELLS`. Nearest is a one-hot matrix: exact in fp16 too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import Lowering, NotLowerable

#: the largest interpolation matrix spelt into the program (4 Mi cells: 16 MB in fp32)
DEFAULT_MAX_MATRIX_CELLS = 4 * 1024 * 1024


@dataclass(frozen=True)
class Interpolation:
    """The attributes of one Resize node that shape its matrices."""

    mode: str
    coords: str
    nearest_mode: str
    cubic_a: float
    exclude_outside: bool
    antialias: bool


def source_coordinates(
    ip: Interpolation, n: int, m: int, scale: float, roi: tuple[float, float]
) -> np.ndarray:
    """Where each of the m outputs samples the input (ONNX's coordinate_transformation_mode)."""
    x = np.arange(m, dtype=np.float64)
    # ONNX spaces samples by the scaled width, scale * n, which need not be whole (m is its floor)
    width = scale * n
    if ip.coords == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if ip.coords == "half_pixel_symmetric":
        return n / 2 * (1 - m / width) + (x + 0.5) / scale - 0.5
    if ip.coords == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if width != 1 else np.full(m, -0.5)
    if ip.coords == "align_corners":
        return x * (n - 1) / (width - 1) if width != 1 else np.zeros(m)
    if ip.coords == "asymmetric":
        return x / scale
    if ip.coords == "tf_crop_and_resize":
        start, end = roi
        step = (
            x * (end - start) * (n - 1) / (width - 1)
            if width != 1
            else np.full(m, (end - start) * (n - 1) / 2)
        )
        return step + start * (n - 1)
    raise NotLowerable(f"coordinate_transformation_mode {ip.coords!r} is not one ONNX defines")


def _nearest_offset(ip: Interpolation, ratio: float) -> int:
    if ratio == 0.0:
        return 0
    if ip.nearest_mode == "round_prefer_floor":
        return int(ratio > 0.5)
    if ip.nearest_mode == "round_prefer_ceil":
        return int(ratio >= 0.5)
    if ip.nearest_mode == "floor":
        return 0
    if ip.nearest_mode == "ceil":
        return 1
    raise NotLowerable(f"nearest_mode {ip.nearest_mode!r} is not one ONNX defines")


def _cubic(distance: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _taps(ip: Interpolation, ratio: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Offsets from floor(x) and their weights for linear/cubic (antialiased where downscaling)."""
    shrink = min(scale, 1.0) if ip.antialias else 1.0
    reach = 1.0 if ip.mode == "linear" else 2.0
    start = math.floor(-reach / shrink) + 1
    offsets = np.arange(start, 1 - start + 1)
    distance = (offsets - ratio) * shrink
    weights = np.clip(1 - np.abs(distance), 0, 1) if ip.mode == "linear" else _cubic(distance, ip.cubic_a)
    return offsets, weights / weights.sum() if ip.antialias else weights


def interpolation_matrix(
    ip: Interpolation, n: int, m: int, scale: float, roi: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """(M, inside): the (m, n) matrix of one axis, and which outputs fall inside the crop."""
    matrix = np.zeros((m, n), np.float64)
    inside = np.ones(m, bool)
    for i, position in enumerate(source_coordinates(ip, n, m, scale, roi)):
        if ip.coords == "tf_crop_and_resize" and not 0 <= position <= n - 1:
            inside[i] = False
            continue
        base = math.floor(position)
        ratio = float(position - base)
        if ip.mode == "nearest":
            matrix[i, min(max(base + _nearest_offset(ip, ratio), 0), n - 1)] = 1.0
            continue
        offsets, weights = _taps(ip, ratio, scale)
        taps = base + offsets
        if ip.exclude_outside:
            weights = np.where((taps >= 0) & (taps < n), weights, 0.0)
            weights = weights / weights.sum()
        np.add.at(matrix[i], np.clip(taps, 0, n - 1), weights)
    return matrix, inside


def _axes_and_sizes(lw: Lowering, node: onnx.NodeProto) -> list[tuple[int, int, int, float]]:
    """(axis, n, m, scale) for each axis Resize changes or samples, from scales or sizes."""
    attrs = lw.attrs(node)
    rank = lw.rank(node.input[0])
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    dims = lw.static_dims(node.input[0])
    scales = lw.const(node.input[2]) if lw.has(node, 2) else None
    found = []
    if scales is not None and scales.size:
        for axis, scale in zip(axes, scales.reshape(-1), strict=True):
            n = dims[axis]
            if n is None:
                raise NotLowerable("Resize of a free dim needs static input dims (use --shape)")
            found.append((axis, n, math.floor(n * float(scale)), float(scale)))
        return found
    sizes = lw.require_const(node, 3, "Resize sizes (or scales)").reshape(-1)
    if any(dims[axis] is None for axis in axes):
        raise NotLowerable("Resize by sizes needs static input dims (use --shape)")
    ins = [int(dims[axis] or 0) for axis in axes]
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return [(axis, n, int(m), int(m) / n) for axis, n, m in zip(axes, ins, sizes, strict=True)]
    ratios = [int(m) / n for n, m in zip(ins, sizes, strict=True)]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    return [(axis, n, int(np.round(n * scale)), scale) for axis, n in zip(axes, ins, strict=True)]


def lower_resize_by_matrices(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    if lw.opset < 11:
        raise NotLowerable("Resize-10 is supported only as integer upsampling")
    attrs = lw.attrs(node)
    ip = Interpolation(
        mode=str(attrs.get("mode", "nearest")),
        coords=str(attrs.get("coordinate_transformation_mode", "half_pixel")),
        nearest_mode=str(attrs.get("nearest_mode", "round_prefer_floor")),
        cubic_a=float(attrs.get("cubic_coeff_a", -0.75)),
        exclude_outside=bool(int(attrs.get("exclude_outside", 0))),
        antialias=bool(int(attrs.get("antialias", 0))),
    )
    if ip.mode not in ("nearest", "linear", "cubic"):
        raise NotLowerable(f"Resize mode {ip.mode!r} is not one ONNX defines")
    x = lw.var(node.input[0])
    if lw.dtype_of(node.input[0]) not in ("fp32", "fp16"):
        raise NotLowerable("Resize of an integer tensor is not supported")
    dtype = lw.types.nptype_from_builtin(x.dtype)
    rank = len(x.shape)
    roi = _roi(lw, node, rank) if ip.coords == "tf_crop_and_resize" else {}
    outside: np.ndarray | None = None
    for axis, n, m, scale in _axes_and_sizes(lw, node):
        if m * n > DEFAULT_MAX_MATRIX_CELLS:
            raise NotLowerable(f"Resize of {n} to {m} needs a matrix over {DEFAULT_MAX_MATRIX_CELLS} cells")
        matrix, inside = interpolation_matrix(ip, n, m, scale, roi.get(axis, (0.0, 1.0)))
        if m == n and inside.all() and np.array_equal(matrix, np.eye(n)):
            continue
        x = _apply(lw, x, matrix.astype(dtype), axis, rank)
        shape = [1] * rank
        shape[axis] = m
        missing = ~inside.reshape(shape)
        outside = missing if outside is None else (outside | missing)
    if outside is not None and outside.any():
        extrapolation = np.float32(attrs.get("extrapolation_value", 0.0))
        x = lw.mb.add(x=x, y=(outside * extrapolation).astype(dtype))
    return [lw.mb.identity(x=x, name=lw.name(node))]


def _roi(lw: Lowering, node: onnx.NodeProto, rank: int) -> dict[int, tuple[float, float]]:
    roi = lw.require_const(node, 1, "tf_crop_and_resize's roi").reshape(-1).astype(np.float64)
    attrs = lw.attrs(node)
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    half = len(roi) // 2
    return {axis: (float(roi[i]), float(roi[half + i])) for i, axis in enumerate(axes)}


def _apply(lw: Lowering, x: Any, matrix: np.ndarray, axis: int, rank: int) -> Any:
    """x with `axis` replaced by matrix @ (that axis): one matmul, transposes where it is inner."""
    mb = lw.mb
    if axis == rank - 1:
        return mb.matmul(x=x, y=np.ascontiguousarray(matrix.T))
    if axis == rank - 2:
        return mb.matmul(x=matrix, y=x)
    perm = [i for i in range(rank) if i != axis] + [axis]
    moved = mb.matmul(x=mb.transpose(x=x, perm=perm), y=np.ascontiguousarray(matrix.T))
    return mb.transpose(x=moved, perm=[int(i) for i in np.argsort(perm)])
