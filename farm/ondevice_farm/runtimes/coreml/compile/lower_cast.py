"""ONNX Cast -> MIL `cast`, and the casts MIL has no type for.

ML Programs hold fp16, fp32, int32 (and int8/uint8 between quantize ops) and bool. A cast to
int64/float64 is one to int32/fp32; to float8, bfloat16 and float4 it is rounded in fp32
(`narrow_floats`); to a 4-bit or 2-bit integer it is refused, as ONNX leaves its out-of-range
values undefined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import MIL_DTYPES, LowerFn, Lowering, NotLowerable
from ondevice_farm.runtimes.coreml.compile.narrow_floats import NARROW_FLOATS, round_to_e8m0, round_to_format


def lower_cast(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    attrs = lw.attrs(node)
    to = int(attrs["to"])
    fmt = NARROW_FLOATS.get(to)
    if to == onnx.TensorProto.FLOAT8E8M0:
        x = _as_fp32(lw, node.input[0])
        round_mode, saturate = str(attrs.get("round_mode", "up")), bool(int(attrs.get("saturate", 1)))
        if round_mode not in ("up", "down", "nearest"):
            raise NotLowerable(f"Cast round_mode {round_mode!r} is not one of up, down, nearest")
        return [round_to_e8m0(lw.mb, x, round_mode=round_mode, saturate=saturate, name=lw.name(node))]
    if fmt is not None:
        # held in fp32, rounded to the type's values; `saturate` is float8's alone (float4 and
        # bfloat16 casts are plain conversions)
        saturate = bool(int(attrs.get("saturate", 1))) and fmt.name.startswith("float8")
        return [
            round_to_format(lw.mb, _as_fp32(lw, node.input[0]), fmt, saturate=saturate, name=lw.name(node))
        ]
    if to not in MIL_DTYPES:
        raise NotLowerable(f"cast to {onnx.helper.tensor_dtype_to_np_dtype(to)} is not supported")
    if to in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4, onnx.TensorProto.INT2, onnx.TensorProto.UINT2):
        # held in int32, a cast would keep values the type cannot hold, where ONNX leaves the
        # result undefined (its reference gives 0); QuantizeLinear to these types saturates instead
        raise NotLowerable(
            f"cast to {onnx.helper.tensor_dtype_to_np_dtype(to)} is not supported (out-of-range values "
            "are undefined in ONNX; QuantizeLinear to it saturates and is lowered)"
        )
    dtype = MIL_DTYPES[to]
    if lw.dtype_of(node.input[0]) == dtype:
        return [lw.value(node.input[0])]
    return [lw.mb.cast(x=lw.var(node.input[0]), dtype=dtype, name=lw.name(node))]


def _as_fp32(lw: Lowering, name: str) -> Any:
    x = lw.var(name)
    return x if lw.dtype_of(name) == "fp32" else lw.mb.cast(x=x, dtype="fp32")


CAST_LOWERINGS: dict[str, LowerFn] = {"Cast": lower_cast}
