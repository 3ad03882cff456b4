"""ONNX's narrow float types (float8, bfloat16, float4, ...) in an ML Program, which has none of them.

Every value of these types is an fp32 value, so a tensor of one is held in fp32: a graph input is
an fp32 input (the job feeds its values widened, exactly), and a value the program makes in such a
type (a Cast to it, QuantizeLinear to float8, an op on bfloat16 tensors) is computed in fp32 and then
rounded to the type's grid by `round_to_format`, a handful of elementwise MIL ops. The result is the
value ONNX gives, held in fp32: a precision change at the program's boundary (4 bytes per element
instead of 1 or 2), said in the compile report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto


@dataclass(frozen=True)
class FloatFormat:
    """A binary float type narrower than fp32, as ml_dtypes (ONNX's reference) defines it."""

    name: str
    #: explicit mantissa bits
    mantissa_bits: int
    #: the exponent of the smallest normal value (below it the grid step stays 2**(min - mantissa))
    min_exponent: int
    max_value: float
    has_inf: bool
    has_nan: bool


#: ONNX tensor type -> its format. float8_e8m0 (a power of two, no mantissa) is held in fp32 too;
#: a Cast to it rounds by `round_to_e8m0`, after the reference's own rule.
NARROW_FLOATS: dict[int, FloatFormat] = {
    TensorProto.BFLOAT16: FloatFormat("bfloat16", 7, -126, (2 - 2**-7) * 2.0**127, True, True),
    TensorProto.FLOAT8E4M3FN: FloatFormat("float8_e4m3fn", 3, -6, 448.0, False, True),
    TensorProto.FLOAT8E4M3FNUZ: FloatFormat("float8_e4m3fnuz", 3, -7, 240.0, False, True),
    TensorProto.FLOAT8E5M2: FloatFormat("float8_e5m2", 2, -14, 57344.0, True, True),
    TensorProto.FLOAT8E5M2FNUZ: FloatFormat("float8_e5m2fnuz", 2, -15, 57344.0, False, True),
    TensorProto.FLOAT4E2M1: FloatFormat("float4_e2m1fn", 1, 0, 6.0, False, False),
}

#: ONNX types held in fp32 in an ML Program (every value exact there)
HELD_IN_FP32: frozenset[int] = frozenset({*NARROW_FLOATS, TensorProto.FLOAT8E8M0})

#: their numpy (ml_dtypes) names, for constants
HELD_IN_FP32_NAMES: frozenset[str] = frozenset(
    {*(fmt.name for fmt in NARROW_FLOATS.values()), "float8_e8m0fnu"}
)

_LN2 = math.log(2.0)


def round_to_format(mb: Any, x: Any, fmt: FloatFormat, *, saturate: bool, name: str) -> Any:
    """`x` (an fp32 Var) rounded to `fmt` as ONNX's Cast does, held in fp32.

    Round to nearest, ties to even, on the format's grid: the step is 2**(e - mantissa_bits) for a
    value in [2**e, 2**(e+1)), and 2**(min_exponent - mantissa_bits) below the smallest normal.
    `saturate` clips to +-max first (Cast's and QuantizeLinear's default for float8: infinities
    become +-max, NaN stays); otherwise a value that rounds past max becomes inf where the type has
    one, NaN where it has only that, and +-max where it has neither (float4), as ml_dtypes does.
    """
    top = np.float32(fmt.max_value)
    if saturate:
        x = mb.clip(x=x, alpha=-top, beta=top)
    magnitude = mb.abs(x=x)
    exponent = _exponent(mb, mb.clip(x=magnitude, alpha=np.float32(2.0**fmt.min_exponent), beta=top))
    step = pow2(mb, mb.sub(x=exponent, y=np.float32(fmt.mantissa_bits)))
    # x / step is exact (a power of two) and `round` is half to even, as ONNX's RNE
    rounded = mb.mul(x=mb.round(x=mb.real_div(x=magnitude, y=step)), y=step)
    negative = mb.less(x=x, y=np.float32(0))
    signed = mb.select(cond=negative, a=mb.mul(x=rounded, y=np.float32(-1)), b=rounded)
    if not fmt.has_nan:
        # NaN has no code in the type: ml_dtypes gives zero
        signed = mb.select(cond=mb.not_equal(x=x, y=x), a=np.float32(0), b=signed)
    if saturate:
        return mb.identity(x=signed, name=name)
    if not fmt.has_inf and not fmt.has_nan:
        return mb.clip(x=signed, alpha=-top, beta=top, name=name)
    over = mb.greater(x=rounded, y=top)
    # a value past max is nonzero, so times inf it is the infinity of its sign
    overflow = mb.mul(x=signed, y=np.float32(np.inf)) if fmt.has_inf else np.float32(np.nan)
    return mb.select(cond=over, a=overflow, b=signed, name=name)


#: every power of two fp32 holds, by exponent: 2**-149 (its smallest subnormal) to 2**127
_POW2_LOW, _POW2_HIGH = -149, 127
_POW2_TABLE = np.ldexp(1.0, np.arange(_POW2_LOW, _POW2_HIGH + 1)).astype(np.float32)


def pow2(mb: Any, exponent: Any) -> Any:
    """2**exponent, exactly, for an integer-valued fp32 Var (clipped to fp32's range of powers).

    Looked up in a table of the exact powers, not computed by exp2: a transcendental function owes
    no exactness at integers. numpy's fp32 exp2 on AVX-512 CPUs gives 2**127 plus one ulp, and a
    device's GPU or Neural Engine rounds as it does; every comparison against a power of two below
    would then tip the wrong way. A NaN exponent (from a NaN input, whose result is NaN all the
    same) reads 2**0: an index made from NaN would read outside the table."""
    number = mb.select(cond=mb.equal(x=exponent, y=exponent), a=exponent, b=np.float32(0))
    bounded = mb.clip(x=number, alpha=np.float32(_POW2_LOW), beta=np.float32(_POW2_HIGH))
    index = mb.cast(x=mb.sub(x=bounded, y=np.float32(_POW2_LOW)), dtype="int32")
    return mb.gather(x=_POW2_TABLE, indices=index, axis=0)


def _exponent(mb: Any, bounded: Any) -> Any:
    """floor(log2(bounded)) for positive finite values, as fp32.

    Estimated from a log, which may round to the integer on either side near a power of two (on a
    device or a CPU alike), then moved by one where the estimate's exact power says it is off."""
    estimate = mb.floor(x=mb.mul(x=mb.log(x=bounded, epsilon=np.float32(0)), y=np.float32(1 / _LN2)))
    power = pow2(mb, estimate)
    # power * 2 is exact, or inf past 2**127, which no finite value reaches
    too_low = mb.cast(x=mb.greater_equal(x=bounded, y=mb.mul(x=power, y=np.float32(2))), dtype="fp32")
    too_high = mb.cast(x=mb.less(x=bounded, y=power), dtype="fp32")
    return mb.sub(x=mb.add(x=estimate, y=too_low), y=too_high)


#: float8_e8m0's bounds: 2**-127 (code 0) to 2**127 (code 254); 2**-126 is fp32's smallest normal
_E8M0_LOW, _E8M0_HIGH = -127, 127


def round_to_e8m0(mb: Any, x: Any, *, round_mode: str, saturate: bool, name: str) -> Any:
    """`x` (fp32) cast to float8_e8m0 (a power of two) as ONNX's reference does, held in fp32.

    The reference reads |x|'s fp32 exponent field and raises it by one where `round_mode` says:
    `up` for any fraction, `nearest` from 1.5 times the power up, `down` never. Zero is code 0
    (2**-127); an fp32 subnormal is code 0 or 1 by the same rule; NaN and inf are NaN. `saturate`
    stops at 2**127, otherwise a value raised past it is NaN. Decided on the integer exponent, and
    every power of two taken exact from `pow2`."""
    magnitude = mb.abs(x=x)
    exponent = _exponent(mb, mb.clip(x=magnitude, alpha=np.float32(2.0**-126), beta=np.float32(2.0**127)))
    power = pow2(mb, exponent)
    subnormal = mb.less(x=magnitude, y=np.float32(2.0**-126))
    if round_mode == "up":
        raise_normal, raise_subnormal = (
            mb.greater(x=magnitude, y=power),
            mb.greater(x=magnitude, y=np.float32(0)),
        )
    elif round_mode == "nearest":
        raise_normal = mb.greater_equal(x=magnitude, y=mb.mul(x=power, y=np.float32(1.5)))
        raise_subnormal = mb.greater(x=magnitude, y=np.float32(2.0**_E8M0_LOW))
    elif round_mode == "down":
        raise_normal = raise_subnormal = mb.less(x=magnitude, y=np.float32(0))  # never
    else:
        raise ValueError(f"unknown round_mode {round_mode!r}")
    raised = mb.add(x=exponent, y=mb.cast(x=raise_normal, dtype="fp32"))
    # a subnormal is 2**-127 or twice that: exact products, no power to compute
    twice = mb.add(x=mb.cast(x=raise_subnormal, dtype="fp32"), y=np.float32(1))
    tiny = mb.mul(x=twice, y=np.float32(2.0**_E8M0_LOW))
    value = mb.select(cond=subnormal, a=tiny, b=pow2(mb, raised))
    # raised past 2**127: saturated, or NaN; inf and NaN inputs are NaN
    limit = np.float32(2.0**_E8M0_HIGH) if saturate else np.float32(np.nan)
    past = mb.logical_and(x=mb.greater(x=raised, y=np.float32(_E8M0_HIGH)), y=mb.logical_not(x=subnormal))
    value = mb.select(cond=past, a=limit, b=value)
    special = mb.logical_or(x=mb.not_equal(x=x, y=x), y=mb.equal(x=magnitude, y=np.float32(np.inf)))
    return mb.select(cond=special, a=np.float32(np.nan), b=value, name=name)


#: ops whose output values are values of their inputs, or that round to their output type
#: themselves: nothing to round after them
EXACT_OPS = frozenset(
    """
    Cast CastLike QuantizeLinear Identity Reshape Transpose Squeeze Unsqueeze Flatten Concat Split
    Slice Gather GatherElements GatherND Expand Tile Pad Where Max Min Abs Neg Relu ReduceMax
    ReduceMin MaxPool GlobalMaxPool DepthToSpace SpaceToDepth TopK Dropout
    """.split()  # noqa: SIM905  a block of names reads better than 40 quoted strings
)

#: ops ONNX's reference computes in one numpy step on a narrow float (ml_dtypes widens to fp32
#: and rounds once), as the lowering does: computed in fp32, then rounded. An op spelt out in
#: several steps (Attention, Softmax, ...) rounds each intermediate in ONNX and is refused.
ROUNDED_ONCE_OPS = frozenset(
    """
    Add Sub Mul Div Sqrt Reciprocal Exp Log Floor Ceil Round Sign Einsum Range DequantizeLinear
    """.split()  # noqa: SIM905
)
