"""ONNX QuantizeLinear / DequantizeLinear (QDQ models) -> MIL.

Two modes (`--coreml-quantization`):

- **keep**: a constant 8-bit weight behind a DequantizeLinear stays 8-bit in the package, as a
  compile-time `constexpr_affine_dequantize` (iOS 16/17) or `constexpr_blockwise_shift_scale`
  (iOS 18+); activations keep their QuantizeLinear -> DequantizeLinear round trip as the iOS 17
  `quantize` / `dequantize` ops. On iOS 16 (no activation quantize op) activations run in float.
- **float**: every DequantizeLinear of a constant folds to a float constant and each
  QuantizeLinear -> DequantizeLinear pair on an activation becomes a clip to the range the
  quantized type holds (quantizers fold a Relu into that range): the float model the QDQ one was
  made from, with the weights' rounding and without the activations'.

Whatever MIL has no op for (16-bit types, an int32 bias, a quantized graph input, a
QuantizeLinear read by something other than DequantizeLinear) runs as exact float arithmetic:
`clip(round_half_even(x / scale) + zero_point)` and `(q - zero_point) * scale`, as the spec has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lower_quant_arith import (
    dequantize_by_arithmetic,
    narrow_format,
    needs_arithmetic,
    quantize_by_arithmetic,
)
from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable
from ondevice_farm.runtimes.coreml.compile.onnx_graph import SUB_BYTE_INTS
from ondevice_farm.runtimes.coreml.compile.quantization import QuantizedWeight, along, dequantize_array

_EIGHT_BIT = (np.int8, np.uint8)


def integer_range(dtype: Any) -> Any:
    """np.iinfo, and ml_dtypes' for ONNX's 4-bit and 2-bit integers (which numpy does not know)."""
    if np.dtype(dtype).name in SUB_BYTE_INTS:
        import ml_dtypes

        return ml_dtypes.iinfo(np.dtype(dtype).name)  # type: ignore[no-untyped-call]
    return np.iinfo(dtype)


def _axis(lw: Lowering, node: onnx.NodeProto, scale: np.ndarray, rank: int) -> int | None:
    attrs = lw.attrs(node)
    if scale.size == 1:
        # one scale, whatever its shape: per tensor, as ONNX Runtime reads it
        return None
    if scale.ndim > 1:
        raise NotLowerable("a quantization scale must be a scalar or a vector")
    return int(attrs.get("axis", 1)) % max(rank, 1)


def _zero_point(lw: Lowering, node: onnx.NodeProto, default: Any) -> np.ndarray:
    """The zero point in its ONNX dtype (lowering values are widened to int32; the raw one is not)."""
    if lw.has(node, 2):
        raw = lw.constants.get(node.input[2])
        if raw is None:
            raise NotLowerable("the zero point must be a constant")
        return np.asarray(raw)
    return np.zeros((), default)


def _quantized_dtype(lw: Lowering, node: onnx.NodeProto) -> Any:
    if lw.has(node, 2):
        if node.input[2] not in lw.constants and node.input[2] in lw.elem_types:
            # a zero point computed at run time (DynamicQuantizeLinear's expanded form)
            return onnx.helper.tensor_dtype_to_np_dtype(lw.elem_types[node.input[2]])
        return _zero_point(lw, node, np.uint8).dtype
    output_dtype = int(lw.attrs(node).get("output_dtype", 0))
    if output_dtype:
        return onnx.helper.tensor_dtype_to_np_dtype(output_dtype)
    return np.dtype(np.uint8)


def lower_quantize_linear(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    dtype = np.dtype(_quantized_dtype(lw, node))
    integer = dtype.kind in "iu" or dtype.name in SUB_BYTE_INTS
    if not integer and narrow_format(dtype) is None:
        raise NotLowerable(f"QuantizeLinear to {dtype} is not supported")
    if needs_arithmetic(lw, node, dtype):
        return [quantize_by_arithmetic(lw, node, dtype, integer_range(dtype) if integer else None)]
    scale = lw.require_const(node, 1, "QuantizeLinear scale").astype(np.float32)
    x = lw.var(node.input[0])
    rank = len(x.shape)
    axis = _axis(lw, node, scale, rank)
    zero_point = _zero_point(lw, node, dtype).astype(dtype)
    plan = lw.quantization
    consumers = lw.consumers.get(node.output[0], [])
    only_dequantized = bool(consumers) and all(op == "DequantizeLinear" for op in consumers)
    if plan.mode == "float" or (not plan.activation_ops and only_dequantized):
        if only_dequantized:
            # The pair is dropped but not its saturation: quantizers fold a Relu or Clip into the
            # range of the uint8 that follows it, so the range is kept as a clip; the rounding goes.
            lw.dropped_quantize.add(node.output[0])
            return [_saturate(lw, node, x, scale, zero_point, axis)]
    elif dtype.type in _EIGHT_BIT and rank >= 1 and only_dequantized:
        kwargs: dict[str, Any] = {"axis": axis} if axis is not None else {}
        return [
            lw.mb.quantize(
                input=x,
                scale=scale.reshape(-1) if axis is not None else scale.reshape(()),
                zero_point=zero_point.reshape(-1) if axis is not None else zero_point.reshape(()),
                output_dtype=dtype.name,
                name=lw.name(node),
                **kwargs,
            )
        ]
    return [_fake_quantize(lw, node, x, scale, zero_point, axis)]


def _saturate(
    lw: Lowering, node: onnx.NodeProto, x: Any, scale: np.ndarray, zero_point: np.ndarray, axis: int | None
) -> Any:
    """x clipped to the float range the quantized type can represent."""
    info = integer_range(zero_point.dtype)
    shift = zero_point.astype(np.float32)
    low, high = (np.float32(info.min) - shift) * scale, (np.float32(info.max) - shift) * scale
    if axis is None:
        return lw.mb.clip(x=x, alpha=np.float32(low), beta=np.float32(high), name=lw.name(node))
    rank = len(x.shape)
    floor = lw.mb.maximum(x=x, y=along(low.astype(np.float32), axis, rank))
    return lw.mb.minimum(x=floor, y=along(high.astype(np.float32), axis, rank), name=lw.name(node))


def _fake_quantize(
    lw: Lowering, node: onnx.NodeProto, x: Any, scale: np.ndarray, zero_point: np.ndarray, axis: int | None
) -> Any:
    """QuantizeLinear as arithmetic, into an int32 tensor (ML Programs hold 8/16-bit integers
    only between quantize and dequantize; ONNX int8 inputs and outputs are int32 there too)."""
    info = integer_range(zero_point.dtype)
    rank = len(x.shape)
    q = lw.mb.round(x=lw.mb.real_div(x=x, y=along(scale, axis, rank)))
    q = lw.mb.add(x=q, y=along(zero_point.astype(np.float32), axis, rank))
    q = lw.mb.clip(x=q, alpha=np.float32(info.min), beta=np.float32(info.max))
    return lw.mb.cast(x=q, dtype="int32", name=lw.name(node))


def lower_dequantize_linear(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    source = node.input[0]
    source_type = lw.elem_types.get(source, onnx.TensorProto.INT8)
    if needs_arithmetic(lw, node, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(source_type))):
        return [dequantize_by_arithmetic(lw, node)]
    scale = lw.require_const(node, 1, "DequantizeLinear scale").astype(np.float32)
    raw = lw.constants.get(source)
    if raw is not None:
        data = np.asarray(raw)
        axis = _axis(lw, node, scale, data.ndim)
        zero_point = _zero_point(lw, node, data.dtype)
        folded = dequantize_array(data, scale, zero_point, axis)
        plan = lw.quantization
        if plan.mode == "keep" and plan.weight_op and data.dtype.type in _EIGHT_BIT and data.ndim >= 1:
            lw.quantized[node.output[0]] = QuantizedWeight(
                data,
                scale.reshape(-1) if axis is not None else scale.reshape(()),
                # one zero point, whatever its shape (QLinear ops give shape [1]), as one scale
                zero_point.astype(data.dtype).reshape(-1 if axis is not None else ()),
                axis,
            )
        return [folded]
    if source in lw.dropped_quantize:
        return [lw.mb.identity(x=lw.var(source), name=lw.name(node))]
    x = lw.var(source)
    rank = len(x.shape)
    axis = _axis(lw, node, scale, rank)
    dtype = lw.types.builtin_to_string(x.dtype)
    if dtype in ("int8", "uint8"):
        zero_point = _zero_point(lw, node, np.dtype(dtype)).astype(dtype)
        kwargs: dict[str, Any] = {"axis": axis} if axis is not None else {}
        return [
            lw.mb.dequantize(
                input=x,
                scale=scale.reshape(-1) if axis is not None else scale.reshape(()),
                zero_point=zero_point.reshape(-1) if axis is not None else zero_point.reshape(()),
                name=lw.name(node),
                **kwargs,
            )
        ]
    # integers held in an int32 tensor (a graph input, a QuantizeLinear done as arithmetic)
    zero_point = _zero_point(lw, node, np.int32).astype(np.float32)
    as_float = x if dtype in ("fp32", "fp16") else lw.mb.cast(x=x, dtype="fp32")
    shifted = lw.mb.sub(x=as_float, y=along(zero_point, axis, rank))
    return [lw.mb.mul(x=shifted, y=along(scale, axis, rank), name=lw.name(node))]


def lower_dynamic_quantize_linear(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    """uint8 quantization with the scale and zero point of x's range (widened to hold 0), as the
    spec's arithmetic: the scale is known only at run time, which MIL's `quantize` cannot take."""
    mb = lw.mb
    x = lw.var(node.input[0])
    axes = list(range(len(x.shape)))
    low = mb.minimum(x=mb.reduce_min(x=x, axes=axes, keep_dims=False), y=np.float32(0))
    high = mb.maximum(x=mb.reduce_max(x=x, axes=axes, keep_dims=False), y=np.float32(0))
    span = mb.sub(x=high, y=low)
    # an all-zero x has no range; the spec leaves its scale undefined (0/255). ONNX Runtime gives
    # 1.0 (ONNX's reference, 1/255, though its comment quotes Runtime's rule); y is 0 either way
    scale = mb.select(
        cond=mb.equal(x=span, y=np.float32(0)), a=np.float32(1), b=mb.real_div(x=span, y=np.float32(255))
    )
    zero_point = mb.round(
        x=mb.clip(
            x=mb.sub(x=np.float32(0), y=mb.real_div(x=low, y=scale)),
            alpha=np.float32(0),
            beta=np.float32(255),
        )
    )
    q = mb.add(x=mb.round(x=mb.real_div(x=x, y=scale)), y=zero_point)
    q = mb.clip(x=q, alpha=np.float32(0), beta=np.float32(255))
    return [
        mb.cast(x=q, dtype="int32", name=lw.name(node, 0)),
        mb.identity(x=scale, name=lw.name(node, 1)),
        mb.cast(x=zero_point, dtype="int32", name=lw.name(node, 2)),
    ]


QUANT_LOWERINGS: dict[str, LowerFn] = {
    "QuantizeLinear": lower_quantize_linear,
    "DequantizeLinear": lower_dequantize_linear,
    "DynamicQuantizeLinear": lower_dynamic_quantize_linear,
}
