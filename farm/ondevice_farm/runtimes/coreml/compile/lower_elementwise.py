"""ONNX elementwise ops (activations, arithmetic, comparisons, Where) -> MIL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable


def _unary(mil_op: str) -> LowerFn:
    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        return [getattr(lw.mb, mil_op)(x=lw.var(node.input[0]), name=lw.name(node))]

    lower.__name__ = f"lower_{mil_op}"
    return lower


def binary_operands(lw: Lowering, a_name: str, b_name: str) -> tuple[Any, Any]:
    """Both operands of a binary op in one dtype: a constant takes the dtype of the Var beside it."""
    a, b = lw.value(a_name), lw.value(b_name)
    if isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        a = a.astype(lw.types.nptype_from_builtin(b.dtype))
    elif isinstance(b, np.ndarray) and not isinstance(a, np.ndarray):
        b = b.astype(lw.types.nptype_from_builtin(a.dtype))
    return a, b


def _binary(mil_op: str, int_op: str | None = None) -> LowerFn:
    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        a, b = binary_operands(lw, node.input[0], node.input[1])
        op = mil_op
        if int_op is not None and lw.dtype_of(node.input[0]).startswith(("int", "uint")):
            op = int_op
        return [getattr(lw.mb, op)(x=a, y=b, name=lw.name(node))]

    lower.__name__ = f"lower_{mil_op}"
    return lower


def _variadic(mil_op: str) -> LowerFn:
    """Max/Min/Sum with any number of inputs: a chain of binary ops."""

    def lower(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
        names = [n for n in node.input if n]
        if len(names) == 1:
            return [lw.mb.identity(x=lw.var(names[0]), name=lw.name(node))]
        result = lw.var(names[0])
        for i, name in enumerate(names[1:], start=2):
            final = i == len(names)
            other = lw.value(name)
            if isinstance(other, np.ndarray):
                other = other.astype(lw.types.nptype_from_builtin(result.dtype))
            result = getattr(lw.mb, mil_op)(x=result, y=other, **({"name": lw.name(node)} if final else {}))
        return [result]

    lower.__name__ = f"lower_{mil_op}_variadic"
    return lower


def lower_log(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # MIL's log adds an epsilon (1e-45) by default, which turns ONNX's log(0) = -inf into -103
    x = lw.var(node.input[0])
    zero = np.zeros((), lw.types.nptype_from_builtin(x.dtype))
    return [lw.mb.log(x=x, epsilon=zero, name=lw.name(node))]


def lower_mean(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    """Mean of any number of inputs: their broadcast sum times 1/n."""
    names = [n for n in node.input if n]
    total = lw.var(names[0])
    for name in names[1:]:
        other = lw.value(name)
        if isinstance(other, np.ndarray):
            other = other.astype(lw.types.nptype_from_builtin(total.dtype))
        total = lw.mb.add(x=total, y=other)
    scale = np.asarray(1.0 / len(names), lw.types.nptype_from_builtin(total.dtype))
    return [lw.mb.mul(x=total, y=scale, name=lw.name(node))]


def lower_div(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    a, b = binary_operands(lw, node.input[0], node.input[1])
    if not lw.dtype_of(node.input[0]).startswith(("int", "uint")):
        return [lw.mb.real_div(x=a, y=b, name=lw.name(node))]
    # ONNX integer division truncates toward zero; MIL's floor_div floors: add 1 back where the
    # quotient is negative and inexact.
    floor = lw.mb.floor_div(x=a, y=b)
    negative = lw.mb.logical_xor(x=lw.mb.less(x=a, y=np.int32(0)), y=lw.mb.less(x=b, y=np.int32(0)))
    inexact = lw.mb.not_equal(x=lw.mb.mul(x=floor, y=b), y=a)
    fix = lw.mb.cast(x=lw.mb.logical_and(x=negative, y=inexact), dtype="int32")
    return [lw.mb.add(x=floor, y=fix, name=lw.name(node))]


def lower_pow(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    base = lw.var(node.input[0])
    exponent = lw.const(node.input[1])
    if exponent is not None:
        exp_value = exponent.astype(lw.types.nptype_from_builtin(base.dtype))
        if exp_value.size == 1 and float(exp_value) == 2.0:
            # x*x is exact where pow goes through exp/log on some backends
            return [lw.mb.mul(x=base, y=base, name=lw.name(node))]
        return [lw.mb.pow(x=base, y=exp_value, name=lw.name(node))]
    exp_var = lw.var(node.input[1])
    if exp_var.dtype != base.dtype:
        exp_var = lw.mb.cast(x=exp_var, dtype=lw.types.builtin_to_string(base.dtype))
    return [lw.mb.pow(x=base, y=exp_var, name=lw.name(node))]


def lower_relu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    return [lw.mb.relu(x=lw.var(node.input[0]), name=lw.name(node))]


def lower_leaky_relu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    alpha = float(lw.attrs(node).get("alpha", 0.01))
    return [lw.mb.leaky_relu(x=lw.var(node.input[0]), alpha=alpha, name=lw.name(node))]


def lower_clip(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    attrs = lw.attrs(node)
    low = lw.const(node.input[1]) if lw.has(node, 1) else attrs.get("min")
    high = lw.const(node.input[2]) if lw.has(node, 2) else attrs.get("max")
    np_type = lw.types.nptype_from_builtin(x.dtype)
    if (lw.has(node, 1) and low is None) or (lw.has(node, 2) and high is None):
        # a bound known only at run time: max then min, which gives max where min > max, as ONNX
        result = lw.mb.maximum(x=x, y=lw.var(node.input[1])) if lw.has(node, 1) else x
        upper = lw.var(node.input[2]) if lw.has(node, 2) else None
        if upper is None:
            return [lw.mb.identity(x=result, name=lw.name(node))]
        return [lw.mb.minimum(x=result, y=upper, name=lw.name(node))]
    floating = np.issubdtype(np_type, np.floating)
    if (
        low is not None
        and high is not None
        and floating
        and float(np.asarray(low)) <= float(np.asarray(high))
    ):
        lo, hi = float(np.asarray(low)), float(np.asarray(high))
        if lo == 0.0 and hi == 6.0:
            return [lw.mb.relu6(x=x, name=lw.name(node))]
        return [lw.mb.clip(x=x, alpha=np_type(lo), beta=np_type(hi), name=lw.name(node))]
    result = x
    if low is not None:
        last = high is None
        kwargs = {"name": lw.name(node)} if last else {}
        result = lw.mb.maximum(x=result, y=np.asarray(low, dtype=np_type), **kwargs)
    if high is not None:
        result = lw.mb.minimum(x=result, y=np.asarray(high, dtype=np_type), name=lw.name(node))
    if result is x:
        result = lw.mb.identity(x=x, name=lw.name(node))
    return [result]


def lower_gelu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    approximate = lw.attrs(node).get("approximate", "none")
    mode = "TANH_APPROXIMATION" if approximate == "tanh" else "EXACT"
    return [lw.mb.gelu(x=lw.var(node.input[0]), mode=mode, name=lw.name(node))]


def lower_softmax(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    axis = int(lw.attrs(node).get("axis", -1))
    return [lw.mb.softmax(x=lw.var(node.input[0]), axis=axis, name=lw.name(node))]


def lower_reciprocal(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # not MIL's inverse, which adds an epsilon to the divisor
    x = lw.var(node.input[0])
    one = np.array(1, dtype=lw.types.nptype_from_builtin(x.dtype))
    return [lw.mb.real_div(x=one, y=x, name=lw.name(node))]


def lower_neg(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    minus_one = np.array(-1, dtype=lw.types.nptype_from_builtin(x.dtype))
    return [lw.mb.mul(x=x, y=minus_one, name=lw.name(node))]


def lower_hard_sigmoid(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    return [lw.mb.sigmoid_hard(x=lw.var(node.input[0]), alpha=alpha, beta=beta, name=lw.name(node))]


def lower_hard_swish(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    gate = lw.mb.sigmoid_hard(x=x, alpha=1.0 / 6.0, beta=0.5)
    return [lw.mb.mul(x=x, y=gate, name=lw.name(node))]


def lower_identity(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # Identity and inference-mode Dropout: the tensor itself.
    return [lw.value(node.input[0])]


def lower_dropout(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    """Inference-mode Dropout passes its input on, and its mask is all true; training mode is random,
    but for a ratio of 0, where it drops nothing and scales by 1/(1-0): the same program."""
    if lw.has(node, 2):
        training = lw.const(node.input[2])
        if training is None:
            raise NotLowerable("Dropout's training_mode must be a constant")
        ratio = lw.const(node.input[1]) if lw.has(node, 1) else None
        dropping = ratio is None or float(ratio.reshape(-1)[0]) != 0.0  # the default ratio is 0.5
        if bool(training.reshape(-1)[0]) and dropping:
            raise NotLowerable("training-mode Dropout is random: it has no inference-time program")
    if len(node.output) < 2 or not node.output[1]:
        return [lw.value(node.input[0])]
    dims = lw.static_dims(node.input[0])
    if any(d is None for d in dims):
        raise NotLowerable("the Dropout mask output needs a static input shape")
    return [lw.value(node.input[0]), np.ones([d for d in dims if d is not None], bool)]


def lower_where(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    cond = lw.var(node.input[0])
    a, b = binary_operands(lw, node.input[1], node.input[2])
    # MIL's select takes its shape from a and b alone: where cond is larger, widen a to the full shape.
    cond_shape, a_shape, b_shape = (tuple(v.shape) for v in (cond, a, b))
    if _broadcast(cond_shape, a_shape, b_shape) != _broadcast(a_shape, b_shape):
        full = _broadcast(cond_shape, a_shape, b_shape)
        if isinstance(a, np.ndarray) and full is not None and all(isinstance(d, int) for d in full):
            a = np.broadcast_to(a, full).copy()
        else:
            dtype = lw.types.numpy_type_to_builtin_type(a.dtype) if isinstance(a, np.ndarray) else a.dtype
            as_zeros = lw.mb.cast(x=cond, dtype=lw.types.builtin_to_string(dtype))
            a = lw.mb.add(x=a, y=lw.mb.mul(x=as_zeros, y=lw.types.nptype_from_builtin(dtype)(0)))
    return [lw.mb.select(cond=cond, a=a, b=b, name=lw.name(node))]


def _broadcast(*shapes: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """numpy's broadcast of shapes that may hold symbols; None where symbols make it unknowable."""
    rank = max(len(shape) for shape in shapes)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    result: list[Any] = []
    for dims in zip(*padded, strict=True):
        sizes = {int(d) if isinstance(d, (int, np.integer)) else d for d in dims} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def lower_elu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    alpha = float(lw.attrs(node).get("alpha", 1.0))
    return [lw.mb.elu(x=lw.var(node.input[0]), alpha=alpha, name=lw.name(node))]


def lower_prelu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # select(x >= 0, x, slope * x) takes any slope shape ONNX allows; MIL's prelu wants one per channel.
    x = lw.var(node.input[0])
    _, slope = binary_operands(lw, node.input[0], node.input[1])
    zero = np.array(0, dtype=lw.types.nptype_from_builtin(x.dtype))
    positive = lw.mb.greater_equal(x=x, y=zero)
    return [lw.mb.select(cond=positive, a=x, b=lw.mb.mul(x=x, y=slope), name=lw.name(node))]


def lower_log_softmax(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # x - max - log(sum(exp(x - max))): stable where log(softmax(x)) underflows to log(0)
    x = lw.var(node.input[0])
    axis = int(lw.attrs(node).get("axis", -1))
    shifted = lw.mb.sub(x=x, y=lw.mb.reduce_max(x=x, axes=[axis], keep_dims=True))
    total = lw.mb.reduce_log_sum_exp(x=shifted, axes=[axis], keep_dims=True)
    return [lw.mb.sub(x=shifted, y=total, name=lw.name(node))]


def lower_selu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    alpha = float(attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(attrs.get("gamma", 1.05070102214813232421875))
    elu = lw.mb.elu(x=lw.var(node.input[0]), alpha=alpha)
    return [lw.mb.mul(x=elu, y=np.float32(gamma), name=lw.name(node))]


def lower_mish(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    x = lw.var(node.input[0])
    return [lw.mb.mul(x=x, y=lw.mb.tanh(x=lw.mb.softplus(x=x)), name=lw.name(node))]


def lower_thresholded_relu(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    # spelled out: x where x > alpha, else 0 (strictly greater, as ONNX has it)
    x = lw.var(node.input[0])
    np_type = lw.types.nptype_from_builtin(x.dtype)
    alpha = np_type(lw.attrs(node).get("alpha", 1.0))
    above = lw.mb.greater(x=x, y=alpha)
    return [lw.mb.select(cond=above, a=x, b=np_type(0), name=lw.name(node))]


def lower_erf(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    return [lw.mb.erf(x=lw.var(node.input[0]), name=lw.name(node))]


ELEMENTWISE_LOWERINGS: dict[str, LowerFn] = {
    "Relu": lower_relu,
    "LeakyRelu": lower_leaky_relu,
    "Clip": lower_clip,
    "Sigmoid": _unary("sigmoid"),
    "Tanh": _unary("tanh"),
    "Gelu": lower_gelu,
    "Erf": lower_erf,
    "Elu": lower_elu,
    "PRelu": lower_prelu,
    "Sin": _unary("sin"),
    "Cos": _unary("cos"),
    "Tan": _unary("tan"),
    "Asin": _unary("asin"),
    "Acos": _unary("acos"),
    "Atan": _unary("atan"),
    "Sinh": _unary("sinh"),
    "Cosh": _unary("cosh"),
    "Atanh": _unary("atanh"),
    "Sign": _unary("sign"),
    "Softsign": _unary("softsign"),
    "LogSoftmax": lower_log_softmax,
    "Selu": lower_selu,
    "Mish": lower_mish,
    "ThresholdedRelu": lower_thresholded_relu,
    "Softmax": lower_softmax,
    "Sqrt": _unary("sqrt"),
    "Exp": _unary("exp"),
    "Log": lower_log,
    "Abs": _unary("abs"),
    "Floor": _unary("floor"),
    # MIL's round is half to even (0.5 -> 0), as ONNX's Round
    "Round": _unary("round"),
    "Ceil": _unary("ceil"),
    "Not": _unary("logical_not"),
    "Softplus": _unary("softplus"),
    "Reciprocal": lower_reciprocal,
    "Neg": lower_neg,
    "HardSigmoid": lower_hard_sigmoid,
    "HardSwish": lower_hard_swish,
    "Add": _binary("add"),
    "Sub": _binary("sub"),
    "Mul": _binary("mul"),
    "Div": lower_div,
    "Pow": lower_pow,
    "Equal": _binary("equal"),
    "Less": _binary("less"),
    "LessOrEqual": _binary("less_equal"),
    "Greater": _binary("greater"),
    "GreaterOrEqual": _binary("greater_equal"),
    "And": _binary("logical_and"),
    "Or": _binary("logical_or"),
    "Xor": _binary("logical_xor"),
    "Max": _variadic("maximum"),
    "Min": _variadic("minimum"),
    "Sum": _variadic("add"),
    "Mean": lower_mean,
    "Identity": lower_identity,
    "Dropout": lower_dropout,
    "Where": lower_where,
}
