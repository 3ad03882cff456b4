"""The kernels a TVM build calls, read from the Relax module at three points of its pipeline.

TVM's Relax ONNX frontend turns each ONNX node into Relax ops (a Conv with a bias is `conv2d`,
`reshape` and `add`); `LegalizeOps` lowers each op to a TIR PrimFunc (`conv2d`, `add`, `relu`,
numbered where shapes differ: `conv2d1`); `FuseOps` groups PrimFuncs into primitive Relax
functions (`fused_conv2d1_add_relu`) that `FuseTIR` merges into one PrimFunc each; and
`RewriteDataflowReshape` turns the reshapes that only relabel memory into VM builtins (views,
no kernel). A kernel is a `call_tir` left after that: what the VM calls, one compiled loop nest.

The counts compare like with like: the kernels before fusion are the `call_tir`s of the module
that enters `FuseOps` with the same reshape rewrite applied, so a reshape counts on neither side.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

#: TVM's op names (its PrimFuncs' base names) -> the op group every compile report uses
#: (compile/precision.py), so TVM's kernels compare with the other runtimes' ops group by group
TVM_OP_GROUPS: dict[str, str] = {
    **dict.fromkeys(["conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose"], "conv"),
    **dict.fromkeys(["matmul", "dense", "batch_matmul", "linear"], "matmul"),
    **dict.fromkeys(["add", "subtract"], "add"),
    **dict.fromkeys(["multiply", "divide"], "mul"),
    **dict.fromkeys(["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool1d", "avg_pool1d"], "pool"),
    **dict.fromkeys(["mean", "sum", "max", "min", "prod"], "reduce"),
    **dict.fromkeys(["relu", "gelu", "sigmoid", "tanh", "erf", "silu", "clip", "leakyrelu"], "activation"),
    **dict.fromkeys(["softmax", "log_softmax"], "softmax"),
    **dict.fromkeys(["layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm"], "norm"),
    **dict.fromkeys(["concatenate"], "concat"),
}

#: tensor dtype -> the precision word of the compile reports
PRECISIONS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int8": "int8", "uint8": "int8"}


@dataclass(frozen=True)
class Kernel:
    """One kernel call of the built module, in execution order."""

    #: the PrimFunc's symbol, as the VM (and its instrument) names it: `fused_conv2d1_add_relu`
    name: str
    #: its kind without TVM's shape numbering: `fused_conv2d_add_relu`; the report's op type
    op_type: str
    #: the ops it computes, in order (`conv2d`, `add`, `relu`); one where nothing was fused
    ops: tuple[str, ...]
    #: the dtype of what it writes
    dtype: str

    @property
    def fused(self) -> bool:
        return len(self.ops) > 1

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "op_type": self.op_type, "ops": list(self.ops), "dtype": self.dtype}


def _relax() -> Any:
    return importlib.import_module("tvm.relax")


def _call_tir_op() -> Any:
    return importlib.import_module("tvm.ir").Op.get("relax.call_tir")


def _relax_functions(module: Any) -> list[Any]:
    """The module's Relax functions that the VM runs (not the primitive ones fusion made), `main` first."""
    relax = _relax()
    functions = [
        (gv.name_hint, fn)
        for gv, fn in module.functions.items()
        if isinstance(fn, relax.Function) and not (fn.attrs and "Primitive" in fn.attrs)
    ]
    return [fn for _, fn in sorted(functions, key=lambda item: (item[0] != "main", item[0]))]


def tir_calls(function: Any) -> list[tuple[str, str]]:
    """(PrimFunc name, output dtype) of each `call_tir` in a Relax function, in binding order."""
    call_tir = _call_tir_op()
    relax = _relax()
    found: list[tuple[str, str]] = []

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and expr.op.same_as(call_tir):
            found.append((str(expr.args[0].name_hint), str(getattr(expr.ty, "dtype", ""))))

    relax.analysis.post_order_visit(function.body, visit)
    return found


def module_tir_calls(module: Any) -> list[tuple[str, str]]:
    return [call for function in _relax_functions(module) for call in tir_calls(function)]


def kernels_before_fusion(entering_fusion: Any) -> int:
    """The kernel calls the module would make unfused: the `call_tir`s of the module that enters
    `FuseOps`, its memory-only reshapes rewritten as the pipeline rewrites them later."""
    rewritten = _relax().transform.RewriteDataflowReshape()(entering_fusion)
    return len(module_tir_calls(rewritten))


def base_name(name: str, known: frozenset[str]) -> str:
    """`conv2d1` -> `conv2d` where `conv2d` is a PrimFunc too: TVM numbers a second PrimFunc of one
    op (another shape); a name whose digits are its own (`atan2`) keeps them."""
    stem = name
    while stem and stem[-1].isdigit():
        stem = stem[:-1]
        if stem in known:
            return stem
    return name


def built_kernels(legalized: Any, fused: Any, final: Any) -> list[Kernel]:
    """The kernels the VM calls (`final`: after the reshape rewrite), each with the ops it fused:
    the PrimFuncs `FuseOps` grouped under its name (`fused`), named as `LegalizeOps` made them
    (`legalized`)."""
    relax = _relax()
    known = frozenset(gv.name_hint for gv, _ in legalized.functions.items())
    groups: dict[str, list[str]] = {}
    for gv, function in fused.functions.items():
        if isinstance(function, relax.Function) and function.attrs and "Primitive" in function.attrs:
            groups[gv.name_hint] = [name for name, _ in tir_calls(function)]
    out: list[Kernel] = []
    for name, dtype in module_tir_calls(final):
        ops = tuple(base_name(op, known) for op in groups.get(name, [name]))
        op_type = "fused_" + "_".join(ops) if len(ops) > 1 else ops[0]
        out.append(Kernel(name, op_type, ops, dtype))
    return out


def op_groups(kernels: list[Kernel]) -> list[tuple[str, str]]:
    """(op group, precision) of every op the kernels compute, for `precision.summarise`."""
    return [
        (TVM_OP_GROUPS.get(op, op), PRECISIONS.get(kernel.dtype, kernel.dtype))
        for kernel in kernels
        for op in kernel.ops
    ]


def fusions_named(kernels: list[Kernel]) -> dict[str, int]:
    """`conv2d + add + relu` -> how many kernels fused those ops: the fusions, in words."""
    return dict(sorted(Counter(" + ".join(k.ops) for k in kernels if k.fused).items()))
