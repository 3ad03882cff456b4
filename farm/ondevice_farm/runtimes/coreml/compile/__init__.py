"""CoreML targets: ONNX lowered onto coremltools' MIL, an .mlpackage artifact, its compile
report, and a host MIL executor that predicts the fp16 drift.

coremltools is imported only inside the functions that need it (extra `ondevice-farm[coreml]`).

    onnx_graph  load/check the ONNX model        fold      constant subgraphs folded
    table       op type -> lowering function     lower_*   one function per ONNX op
    lowering    the lowering loop and context    unsupported  the import-stage op check
    convert     compile_coreml, the report       report    MIL histograms, casts, spec I/O
    executor    run a MIL program in numpy       kernels   numpy kernels for missing ops
    drift       predict_drift                    placement MLComputePlan (macOS only)
    qoperator   QLinear ops rewritten to QDQ     lower_control  If/Loop left after folding
    narrow_floats  float8/bfloat16/float4 held in fp32, their rounding as MIL ops
"""

from __future__ import annotations

from pathlib import Path

from ondevice_farm.runtimes.coreml.compile.convert import CoreMLOptions, compile_coreml, list_unsupported
from ondevice_farm.runtimes.coreml.compile.drift import PREDICTION_NOTE, predict_drift
from ondevice_farm.runtimes.coreml.compile.fold import fold_constants
from ondevice_farm.runtimes.coreml.compile.onnx_graph import load_onnx, with_fixed_inputs
from ondevice_farm.runtimes.coreml.compile.qoperator import expand_qoperators


def unsupported_ops(model_path: Path, fixed_inputs: dict[str, float] | None = None) -> list[tuple[str, str]]:
    """(op type, node name) of every node the CoreML lowering cannot take, after constant folding
    (with `fixed_inputs` pinned, as `--fix` pins them).

    Op types without a lowering, and nodes whose attributes the lowering cannot take (found by
    lowering the graph, where coremltools is installed). Empty for a `.mlpackage`, taken as it is.
    """
    if Path(model_path).suffix == ".mlpackage":
        return []
    model = load_onnx(Path(model_path))
    if fixed_inputs:
        model = with_fixed_inputs(model, fixed_inputs)
    graph = expand_qoperators(fold_constants(model))
    return [(item.op_type, item.node) for item in list_unsupported(graph, CoreMLOptions())]


__all__ = ["PREDICTION_NOTE", "compile_coreml", "predict_drift", "unsupported_ops"]
