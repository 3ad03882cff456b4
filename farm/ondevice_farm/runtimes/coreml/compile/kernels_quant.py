"""Numpy kernels for MIL's quantization ops, faithful to the ONNX spec they stand in for:
round half to even, then saturate to the integer type (QuantizeLinear); (q - zero_point) * scale
(DequantizeLinear, and the constexpr ops that hold 8-bit weights in the package).

The arithmetic is fp32 (as the executor's other kernels), on the fp16 or fp32 values the
program stores: in an fp16 program `x / scale` sees x already rounded to fp16.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Args = dict[str, Any]


def _per_axis(vector: Any, axis: Any, rank: int) -> np.ndarray:
    array = np.asarray(vector)
    if array.ndim == 0 or axis is None:
        return array
    shape = [1] * rank
    shape[int(axis)] = -1
    return array.reshape(shape)


def quantize(a: Args) -> list[np.ndarray]:
    x = np.asarray(a["input"], np.float32)
    dtype = np.dtype(str(a["output_dtype"]))
    scale = _per_axis(a["scale"], a.get("axis"), x.ndim).astype(np.float32)
    zero_point = a.get("zero_point")
    shift = np.float32(0) if zero_point is None else _per_axis(zero_point, a.get("axis"), x.ndim)
    info = np.iinfo(dtype)
    # np.rint rounds half to even, as ONNX QuantizeLinear does; the clip is the saturation
    q = np.rint(x / scale) + np.asarray(shift, np.float32)
    return [np.clip(q, info.min, info.max).astype(dtype)]


def dequantize(a: Args) -> list[np.ndarray]:
    q = np.asarray(a["input"])
    scale = _per_axis(a["scale"], a.get("axis"), q.ndim).astype(np.float32)
    zero_point = a.get("zero_point")
    shift = 0 if zero_point is None else _per_axis(zero_point, a.get("axis"), q.ndim).astype(np.int32)
    return [((q.astype(np.int32) - shift).astype(np.float32) * scale).astype(np.float32)]


def constexpr_affine_dequantize(a: Args) -> list[np.ndarray]:
    data = np.asarray(a["quantized_data"])
    axis = int(a["axis"])
    scale = _per_axis(a["scale"], axis, data.ndim).astype(np.float32)
    shift = _per_axis(a["zero_point"], axis, data.ndim).astype(np.float32)
    return [((data.astype(np.float32) - shift) * scale).astype(np.float32)]


def constexpr_blockwise_shift_scale(a: Args) -> list[np.ndarray]:
    data = np.asarray(a["data"]).astype(np.float32)
    scale = np.asarray(a["scale"], np.float32)
    offset = a.get("offset")
    # one scale per block: repeat each along the axes where the data is larger
    for axis, (size, count) in enumerate(zip(data.shape, scale.shape, strict=True)):
        if count != size:
            scale = np.repeat(scale, size // count, axis)
            if offset is not None:
                offset = np.repeat(np.asarray(offset), size // count, axis)
    if offset is not None:
        data = data - np.asarray(offset, np.float32)
    return [(data * scale).astype(np.float32)]


QUANT_KERNELS = {
    "quantize": quantize,
    "dequantize": dequantize,
    "constexpr_affine_dequantize": constexpr_affine_dequantize,
    "constexpr_blockwise_shift_scale": constexpr_blockwise_shift_scale,
}
