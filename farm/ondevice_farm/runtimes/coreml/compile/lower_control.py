"""ONNX control flow that folding could not decide, refused with what would let it fold.

An `If` whose condition folding makes constant is inlined before lowering (fold.py); one whose
condition is known only at run time would need MIL's `cond`, whose branches the host executor
cannot run to check them, so it is refused naming what decides it. Loops are refused likewise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx

from ondevice_farm.runtimes.coreml.compile.lowering import LowerFn, Lowering, NotLowerable


def lower_if(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    raise NotLowerable(
        f"its condition {node.input[0]!r} is known only at run time; pin the scalar input it "
        "depends on with --fix NAME=VALUE so the If folds to one branch"
    )


def lower_loop(lw: Lowering, node: onnx.NodeProto) -> Sequence[Any]:
    raise NotLowerable(f"{node.op_type} is not lowered (no MIL while_loop); unroll it in the export")


CONTROL_LOWERINGS: dict[str, LowerFn] = {"If": lower_if, "Loop": lower_loop, "Scan": lower_loop}
