"""Precision per op group of a MIL program, and the bytes its package holds per weight dtype.

An op computes in **int8** where it reads an activation straight from a `dequantize` (an
8-bit tensor), writes only to `quantize` (or is a conv/matmul) and, if it has a weight, that
weight is held 8-bit (a constexpr dequantization), the rule ONNX Runtime's QDQ units follow:
W8A8, which the Neural Engine of A17 Pro / M4 and later runs as int8-int8 compute (older chips
and the CPU/GPU decompress to fp16 first: the plan, not a measurement). Otherwise the op computes
in the dtype of its output (fp16 or fp32). Ops on integers only (index arithmetic) are left out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ondevice_farm.compile.precision import CONVERSIONS, PrecisionByGroup, op_group, summarise

INT8_NOTE = (
    "int8 in the op precision of a CoreML target means W8A8 in the ML Program (8-bit weights, "
    "activations between quantize and dequantize): the Neural Engine of A17 Pro / M4 and later "
    "computes it int8-int8, older chips and the CPU/GPU in fp16 after decompressing"
)

#: the input holding each op's weight, where it has one
_WEIGHT_INPUT = {
    "conv": "weight",
    "conv_transpose": "weight",
    "linear": "weight",
    "matmul": "y",
    "gather": "x",
}
_CONSTEXPR = ("constexpr_affine_dequantize", "constexpr_blockwise_shift_scale")


def _source(var: Any) -> str | None:
    """The op type a var comes from, looking through casts (the fp16 pass inserts them)."""
    op = var.op
    while op is not None and op.op_type == "cast":
        op = op.x.op
    return None if op is None else str(op.op_type)


def _read_quantized(var: Any) -> bool:
    """Every reader of var quantizes it (looking through casts)."""
    readers = list(var.child_ops)
    if not readers:
        return False
    for op in readers:
        if op.op_type == "cast":
            if not _read_quantized(op.outputs[0]):
                return False
        elif op.op_type != "quantize":
            return False
    return True


def _is_float(var: Any) -> bool:
    from coremltools.converters.mil.mil import types

    dtype = getattr(var, "dtype", None)
    return dtype is not None and types.is_float(dtype)


def _op_precision(op: Any) -> str | None:
    from coremltools.converters.mil.mil import types

    if not op.outputs or not _is_float(op.outputs[0]):
        return None
    weight_name = _WEIGHT_INPUT.get(op.op_type)
    inputs = {name: var for name, var in op.inputs.items() if not isinstance(var, (list, tuple))}
    weight = inputs.get(weight_name) if weight_name else None
    activations = [
        var for name, var in inputs.items() if name != weight_name and _is_float(var) and var.val is None
    ]
    quantized_activation = any(_source(var) == "dequantize" for var in activations)
    weight_8bit = weight is None or _source(weight) in _CONSTEXPR or _source(weight) == "dequantize"
    # as for an ONNX Runtime QDQ unit: 8-bit in, and 8-bit out (or a conv/matmul with 8-bit weights)
    weighted = weight is not None and op_group(str(op.op_type)) in ("conv", "matmul")
    if quantized_activation and weight_8bit and (weighted or all(_read_quantized(out) for out in op.outputs)):
        return "int8"
    return "fp16" if op.outputs[0].dtype == types.fp16 else "fp32"


def mil_op_precision(program: Any) -> PrecisionByGroup:
    per_op = []
    for op in program.functions["main"].operations:
        if op.op_type in CONVERSIONS or op.op_type.startswith("constexpr_"):
            continue
        precision = _op_precision(op)
        if precision is not None:
            per_op.append((str(op.op_type), precision))
    return summarise(per_op)


def weight_bytes(program: Any) -> dict[str, int]:
    """Bytes of constant data per dtype (int8, uint8, fp16, fp32, ...), as the package stores it."""
    sizes: Counter[str] = Counter()
    for op in program.functions["main"].operations:
        if op.op_type != "const":
            continue
        value = op.outputs[0].val
        if isinstance(value, np.ndarray) and value.size > 1:
            sizes[str(value.dtype).replace("float", "fp").replace("fp64", "fp32")] += int(value.nbytes)
    return dict(sorted(sizes.items()))
