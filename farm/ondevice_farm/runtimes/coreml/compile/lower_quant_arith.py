"""QuantizeLinear / DequantizeLinear as the spec's arithmetic, where MIL's quantize ops cannot take
them: a scale or zero point known only at run time (DynamicQuantizeLinear's expanded form computes
them from x), blocked quantization (`block_size`: one scale per block of an axis), and the float8 /
float4 types (quantizing to them is a division and a rounding to the type's values).

    QuantizeLinear    integer: clip(round_half_even(x / scale) + zero_point, type's range)
                      float8:  round_to_format(x / scale)            (the zero point is 0 by spec)
                      float4:  round_to_format(x / scale + zero_point)
    DequantizeLinear  (x - zero_point) * scale                       (float8/float4: x * scale)

Each scale and zero point is made to broadcast against x as ONNX's reference does it: a scalar as
it is, a vector along `axis`, a blocked one repeated `block_size` times along `axis` (then cut to
x's length there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import Lowering, NotLowerable
from ondevice_farm.runtimes.coreml.compile.narrow_floats import NARROW_FLOATS, FloatFormat, round_to_format

_BY_NAME = {fmt.name: fmt for fmt in NARROW_FLOATS.values()}


def narrow_format(dtype: np.dtype[Any]) -> FloatFormat | None:
    """The float8/float4 format of a quantized type, None for an integer type."""
    return _BY_NAME.get(dtype.name)


def needs_arithmetic(lw: Lowering, node: onnx.NodeProto, dtype: np.dtype[Any]) -> bool:
    """Whether the node is one that only the spec's arithmetic can lower."""
    run_time = any(lw.has(node, i) and lw.const(node.input[i]) is None for i in (1, 2))
    return run_time or bool(int(lw.attrs(node).get("block_size", 0))) or narrow_format(dtype) is not None


def quantize_by_arithmetic(lw: Lowering, node: onnx.NodeProto, dtype: np.dtype[Any], info: Any) -> Any:
    """QuantizeLinear into `dtype` (an integer with range `info`, or float8/float4), held in int32
    for an integer type and in fp32 for a float one."""
    mb = lw.mb
    x = _as_fp32(lw, lw.var(node.input[0]), node.input[0])
    scaled = mb.real_div(x=x, y=_broadcastable(lw, node, 1, x))
    fmt = narrow_format(dtype)
    if fmt is not None:
        if fmt.name.startswith("float4") and lw.has(node, 2):
            scaled = mb.add(x=scaled, y=_broadcastable(lw, node, 2, x))
        saturate = bool(int(lw.attrs(node).get("saturate", 1))) and fmt.name.startswith("float8")
        return round_to_format(mb, scaled, fmt, saturate=saturate, name=lw.name(node))
    q = mb.round(x=scaled)
    if lw.has(node, 2):
        q = mb.add(x=q, y=_broadcastable(lw, node, 2, x))
    q = mb.clip(x=q, alpha=np.float32(info.min), beta=np.float32(info.max))
    return mb.cast(x=q, dtype="int32", name=lw.name(node))


def dequantize_by_arithmetic(lw: Lowering, node: onnx.NodeProto) -> Any:
    """DequantizeLinear of an int32-held integer or an fp32-held float8/float4 tensor."""
    mb = lw.mb
    source = node.input[0]
    x = _as_fp32(lw, lw.var(source), source)
    fmt = NARROW_FLOATS.get(lw.elem_types.get(source, 0))
    if lw.has(node, 2) and fmt is None:
        x = mb.sub(x=x, y=_broadcastable(lw, node, 2, x))
    elif lw.has(node, 2) and fmt is not None and fmt.name.startswith("float8"):
        # the spec has a float8 zero point 0 (ONNX's reference refuses another); float4's is unused
        zero = lw.const(node.input[2])
        if zero is None or np.any(np.asarray(zero).astype(np.float32) != 0):
            raise NotLowerable("a float8 zero point must be a constant 0")
    return mb.mul(x=x, y=_broadcastable(lw, node, 1, x), name=lw.name(node))


def _as_fp32(lw: Lowering, value: Any, name: str) -> Any:
    if isinstance(value, np.ndarray):
        return lw.mb.const(val=value.astype(np.float32))
    return value if lw.types.builtin_to_string(value.dtype) == "fp32" else lw.mb.cast(x=value, dtype="fp32")


def _broadcastable(lw: Lowering, node: onnx.NodeProto, index: int, x: Any) -> Any:
    """Input `index` (scale or zero point) in fp32, shaped to broadcast against `x`."""
    attrs = lw.attrs(node)
    rank = len(x.shape)
    axis = int(attrs.get("axis", 1)) % max(rank, 1)
    block = int(attrs.get("block_size", 0))
    known = lw.const(node.input[index])
    if known is None:
        return _run_time(lw, node, index, x, axis, block)
    value = np.asarray(known).astype(np.float32)
    if value.size == 1:
        return value.reshape(())
    if block:
        length = x.shape[axis]
        if not isinstance(length, (int, np.integer)):
            raise NotLowerable("blocked quantization needs a static size along its axis")
        return np.take(np.repeat(value, block, axis=axis), range(int(length)), axis=axis)
    if value.ndim != 1:
        raise NotLowerable(
            "a quantization scale or zero point must be a scalar or a vector without block_size"
        )
    shape = [1] * rank
    shape[axis] = -1
    return value.reshape(shape)


def _run_time(lw: Lowering, node: onnx.NodeProto, index: int, x: Any, axis: int, block: int) -> Any:
    value = _as_fp32(lw, lw.var(node.input[index]), node.input[index])
    if block:
        raise NotLowerable("blocked quantization needs its scale and zero point constant")
    if len(value.shape) == 0:
        return value
    size = value.shape[0]
    if len(value.shape) != 1 or not isinstance(size, (int, np.integer)):
        raise NotLowerable("a run-time quantization scale or zero point must be a scalar or a static vector")
    if size == 1:
        return lw.mb.squeeze(x=value, axes=[0])
    shape = [1] * len(x.shape)
    shape[axis] = int(size)
    return lw.mb.reshape(x=value, shape=shape)
