"""ONNX neural-network ops (convolution, pooling, dense, resize) -> MIL."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lower_pool_window import (
    lower_windowed_avg_pool,
    lower_windowed_max_pool,
)
from ondevice_farm.runtimes.coreml.compile.lower_resize import lower_resize_by_matrices
from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable


def conv_padding(attrs: dict[str, Any], spatial: int) -> tuple[str, list[int]]:
    """ONNX auto_pad/pads -> MIL pad_type and pad ([begin, end] per spatial dim, interleaved)."""
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        return "valid", [0] * (2 * spatial)
    if auto_pad == "SAME_UPPER":
        return "same", [0] * (2 * spatial)
    if auto_pad == "SAME_LOWER":
        return "same_lower", [0] * (2 * spatial)
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * spatial))]
    return "custom", [v for i in range(spatial) for v in (pads[i], pads[i + spatial])]


def lower_conv(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    spatial = lw.require_const(node, 1, "Conv weight").ndim - 2
    weight = lw.weight(node.input[1])
    pad_type, pad = conv_padding(attrs, spatial)
    kwargs: dict[str, Any] = {}
    if lw.has(node, 2):
        kwargs["bias"] = lw.require_const(node, 2, "Conv bias")
    return [
        lw.mb.conv(
            x=lw.var(node.input[0]),
            weight=weight,
            strides=list(attrs.get("strides", [1] * spatial)),
            pad_type=pad_type,
            pad=pad,
            dilations=list(attrs.get("dilations", [1] * spatial)),
            groups=int(attrs.get("group", 1)),
            name=lw.name(node),
            **kwargs,
        )
    ]


def lower_conv_transpose(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    kernel = list(lw.require_const(node, 1, "ConvTranspose weight").shape[2:])
    spatial = len(kernel)
    weight = lw.weight(node.input[1])
    strides = [int(s) for s in attrs.get("strides", [1] * spatial)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * spatial)]
    out_pad = [int(p) for p in attrs.get("output_padding", [0] * spatial)]
    begin, end = _conv_transpose_pads(lw, node, attrs, kernel, strides, dilations, out_pad)
    x = lw.var(node.input[0])
    bias = lw.require_const(node, 2, "ConvTranspose bias") if lw.has(node, 2) else None
    # CoreML has no output_padding: crop less at the end, or pad zeros there when there is nothing to crop.
    crop_end = [e - p for e, p in zip(end, out_pad, strict=True)]
    extra = [max(0, -c) for c in crop_end]
    common = {
        "x": x,
        "weight": weight,
        "strides": strides,
        "pad_type": "custom",
        "pad": [v for i in range(spatial) for v in (begin[i], max(0, crop_end[i]))],
        "dilations": dilations,
        "groups": int(attrs.get("group", 1)),
    }
    if not any(extra):
        kwargs = {"bias": bias} if bias is not None else {}
        return [lw.mb.conv_transpose(name=lw.name(node), **common, **kwargs)]
    y = lw.mb.conv_transpose(**common)
    rank = spatial + 2
    pads = [0] * (2 * rank)
    for i, e in enumerate(extra):
        pads[2 * (i + 2) + 1] = e
    y = lw.mb.pad(x=y, pad=np.array(pads, np.int32), mode="constant", constant_val=0.0)
    if bias is None:
        return [lw.mb.identity(x=y, name=lw.name(node))]
    bias_shape = [-1] + [1] * spatial
    return [lw.mb.add(x=y, y=bias.reshape(bias_shape).astype(np.float32), name=lw.name(node))]


def _conv_transpose_pads(
    lw: Lowering,
    node: onnx.NodeProto,
    attrs: dict[str, Any],
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    out_pad: list[int],
) -> tuple[list[int], list[int]]:
    spatial = len(kernel)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    output_shape = attrs.get("output_shape")
    if output_shape is None and auto_pad in ("NOTSET", "VALID"):
        pads = [int(p) for p in attrs.get("pads", [0] * (2 * spatial))]
        if auto_pad == "VALID":
            pads = [0] * (2 * spatial)
        return pads[:spatial], pads[spatial:]
    in_dims = lw.static_dims(node.input[0])[2:]
    if any(d is None for d in in_dims):
        raise NotLowerable("ConvTranspose with output_shape or SAME padding needs static spatial input dims")
    sizes = [int(d) for d in in_dims if d is not None]
    targets = (
        list(output_shape)[-spatial:]
        if output_shape is not None
        else [s * st for s, st in zip(sizes, strides, strict=True)]
    )
    begin, end = [], []
    for i in range(spatial):
        total = (
            strides[i] * (sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - int(targets[i])
        )
        if total < 0:
            # the output is larger than the full transposed conv: the rest are zeros (plus bias) at the end
            begin.append(0)
            end.append(total)
            continue
        small, large = total // 2, total - total // 2
        # As the ONNX spec (and ONNX Runtime) has it: only SAME_UPPER puts the larger half at the end.
        if auto_pad == "SAME_UPPER":
            begin.append(small)
            end.append(large)
        else:
            begin.append(large)
            end.append(small)
    return begin, end


def _pool(mil_op: str) -> LowerFn:
    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        attrs = lw.attrs(node)
        indices = len(node.output) > 1 and bool(node.output[1])
        if indices or any(int(d) != 1 for d in attrs.get("dilations", [])):
            # MIL's pooling has no dilations and no indices: spelt out per kernel cell
            spelt_out = lower_windowed_max_pool if mil_op == "max_pool" else lower_windowed_avg_pool
            return spelt_out(lw, node)
        kernel = [int(k) for k in attrs["kernel_shape"]]
        spatial = len(kernel)
        pad_type, pad = conv_padding(attrs, spatial)
        common: dict[str, Any] = {
            "kernel_sizes": kernel,
            "strides": list(attrs.get("strides", [1] * spatial)),
            "pad_type": pad_type,
            "pad": pad,
            "ceil_mode": bool(attrs.get("ceil_mode", 0)),
        }
        if mil_op == "avg_pool":
            common["exclude_padding_from_average"] = not int(attrs.get("count_include_pad", 0))
        x = lw.var(node.input[0])
        if lw.dtype_of(node.input[0]) == "int32":
            # MIL pools floats only; ONNX's integer MaxPool is int8/uint8, exact in fp32
            pooled = getattr(lw.mb, mil_op)(x=lw.mb.cast(x=x, dtype="fp32"), **common)
            return [lw.mb.cast(x=pooled, dtype="int32", name=lw.name(node))]
        return [getattr(lw.mb, mil_op)(x=x, name=lw.name(node), **common)]

    lower.__name__ = f"lower_{mil_op}"
    return lower


def _global_pool(mil_op: str) -> LowerFn:
    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        axes = list(range(2, lw.rank(node.input[0])))
        return [
            getattr(lw.mb, mil_op)(x=lw.var(node.input[0]), axes=axes, keep_dims=True, name=lw.name(node))
        ]

    lower.__name__ = f"lower_global_{mil_op}"
    return lower


def lower_matmul(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x, y = lw.var(node.input[0]), lw.var(node.input[1])
    if len(x.shape) > 1 and len(y.shape) > 1:
        return [lw.mb.matmul(x=x, y=y, name=lw.name(node))]
    # numpy's 1-D rules, spelled out: a vector operand gains a unit axis that is dropped again
    dropped = []
    if len(x.shape) == 1:
        x = lw.mb.expand_dims(x=x, axes=[0])
        dropped.append(-2)
    if len(y.shape) == 1:
        y = lw.mb.expand_dims(x=y, axes=[1])
        dropped.append(-1)
    product = lw.mb.matmul(x=x, y=y)
    return [lw.mb.squeeze(x=product, axes=dropped, name=lw.name(node))]


def lower_gemm(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    b = lw.const(node.input[1])
    c = lw.const(node.input[2]) if lw.has(node, 2) else None
    if b is not None and not trans_a and (c is not None or not lw.has(node, 2)):
        # linear's weight is (N, K): ONNX's B when transB=1, B transposed otherwise
        weight = lw.weight(node.input[1], transpose=not trans_b, factor=alpha)
        x = lw.var(node.input[0])
        bias = None if c is None else (c * np.float32(beta)).astype(np.float32)
        if bias is None or _is_row(bias):
            kwargs: dict[str, Any] = {}
            if bias is not None:
                kwargs["bias"] = np.broadcast_to(bias.reshape(-1), (b.shape[0 if trans_b else 1],)).astype(
                    np.float32
                )
            return [lw.mb.linear(x=x, weight=weight, name=lw.name(node), **kwargs)]
        # C of shape (M, N) or (M, 1) broadcasts over rows too: linear's bias is one row only
        product = lw.mb.linear(x=x, weight=weight)
        return [lw.mb.add(x=product, y=bias, name=lw.name(node))]
    y = lw.mb.matmul(
        x=lw.var(node.input[0]), y=lw.var(node.input[1]), transpose_x=trans_a, transpose_y=trans_b
    )
    if alpha != 1.0:
        y = lw.mb.mul(x=y, y=np.float32(alpha))
    if not lw.has(node, 2):
        return [lw.mb.identity(x=y, name=lw.name(node))]
    c_var = lw.var(node.input[2])
    if beta != 1.0:
        c_var = lw.mb.mul(x=c_var, y=np.float32(beta))
    return [lw.mb.add(x=y, y=c_var, name=lw.name(node))]


def _is_row(c: np.ndarray) -> bool:
    """C is one value or one row ((), (1,), (N,), (1, 1), (1, N)): a `linear` bias can hold it."""
    return c.ndim <= 1 or (c.ndim == 2 and c.shape[0] == 1)


def lower_resize(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    try:
        return _resize_by_upsample(lw, node)
    except NotLowerable:
        # beyond MIL's upsample ops (cubic, any scale, other coordinate modes, crops, any axis):
        # one interpolation matrix per resized axis
        return lower_resize_by_matrices(lw, node)


def _resize_by_upsample(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    if len(x.shape) == 3:
        # 1-D resize (audio, sequences): as a 2-D one over a height of 1
        image = lw.mb.expand_dims(x=x, axes=[2])
        resized = _resize_2d(lw, node, image, [1.0, *_resize_factors(lw, node, spatial=1)], final=False)
        return [lw.mb.squeeze(x=resized, axes=[2], name=lw.name(node))]
    if len(x.shape) != 4:
        raise NotLowerable("only 3-D (NCL) and 4-D (NCHW) Resize is supported")
    return [_resize_2d(lw, node, x, _resize_factors(lw, node, spatial=2), final=True)]


def _resize_2d(lw: Lowering, node: onnx.NodeProto, x: Any, factors: list[float], *, final: bool) -> Any:
    attrs = lw.attrs(node)
    named = {"name": lw.name(node)} if final else {}
    mode = attrs.get("mode", "nearest")
    coords = attrs.get("coordinate_transformation_mode", "half_pixel")
    if mode == "nearest":
        nearest = attrs.get("nearest_mode", "round_prefer_floor")
        floor_like = (coords == "asymmetric" and nearest == "floor") or (
            coords in ("half_pixel", "pytorch_half_pixel") and nearest.startswith("round_prefer")
        )
        if not floor_like or any(f != int(f) for f in factors):
            raise NotLowerable(
                f"nearest Resize with {coords}/{nearest} and scales {factors}: only integer upsampling"
            )
        return lw.mb.upsample_nearest_neighbor(
            x=x, scale_factor_height=int(factors[0]), scale_factor_width=int(factors[1]), **named
        )
    if mode != "linear":
        raise NotLowerable(f"Resize mode {mode!r} is not supported")
    if coords not in ("align_corners", "half_pixel", "pytorch_half_pixel", "asymmetric"):
        raise NotLowerable(f"linear Resize with coordinate_transformation_mode {coords!r} is not supported")
    # align_corners=False samples at half-pixel centres; asymmetric needs them off (iOS16+ ops).
    kwargs: dict[str, Any] = {"half_pixel_centers": False} if coords == "asymmetric" else {}
    return lw.mb.upsample_bilinear(
        x=x,
        scale_factor_height=float(factors[0]),
        scale_factor_width=float(factors[1]),
        align_corners=coords == "align_corners",
        **named,
        **kwargs,
    )


def _resize_factors(lw: Lowering, node: onnx.NodeProto, *, spatial: int) -> list[float]:
    """Scale factors of the last `spatial` axes, where CoreML's resampling can match ONNX's."""
    attrs = lw.attrs(node)
    rank = spatial + 2
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    dims = lw.static_dims(node.input[0])
    scales = lw.const(node.input[2]) if lw.has(node, 2) else None
    full = [1.0] * rank
    if scales is not None and scales.size:
        for axis, scale in zip(axes, scales.reshape(-1), strict=True):
            full[axis] = float(scale)
        by_sizes = False
    else:
        sizes = lw.require_const(node, 3, "Resize sizes (or scales)").reshape(-1)
        if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise NotLowerable("keep_aspect_ratio_policy other than 'stretch' is not supported")
        for axis, size in zip(axes, sizes, strict=True):
            dim = dims[axis]
            if dim is None:
                raise NotLowerable("Resize by sizes needs static input dims")
            full[axis] = float(size) / dim
        by_sizes = True
    if full[0] != 1.0 or full[1] != 1.0:
        raise NotLowerable("Resize may scale only the spatial axes")
    factors = full[2:]
    if int(attrs.get("antialias", 0)) and any(f < 1.0 for f in factors):
        raise NotLowerable("antialiased downsampling is not supported")
    coords = attrs.get("coordinate_transformation_mode", "half_pixel")
    for factor, dim in zip(factors, dims[2:], strict=True):
        exact = (
            by_sizes or float(factor).is_integer() or (dim is not None and float(dim * factor).is_integer())
        )
        # CoreML spaces samples by the (whole) output size; ONNX by the scale: equal only when the
        # scaled size is whole, align_corners included.
        if not exact:
            raise NotLowerable(f"scale {factor:g} does not give a whole output size")
        if coords == "pytorch_half_pixel" and dim is not None and math.floor(dim * factor) == 1:
            raise NotLowerable("pytorch_half_pixel Resize to a size of 1 is not supported")
    return factors


NN_LOWERINGS: dict[str, LowerFn] = {
    "Conv": lower_conv,
    "ConvTranspose": lower_conv_transpose,
    "MaxPool": _pool("max_pool"),
    "AveragePool": _pool("avg_pool"),
    "GlobalAveragePool": _global_pool("reduce_mean"),
    "GlobalMaxPool": _global_pool("reduce_max"),
    "MatMul": lower_matmul,
    "Gemm": lower_gemm,
    "Resize": lower_resize,
}
