"""CoreML targets: ONNX lowered onto coremltools' MIL, an .mlpackage artifact, its compile
report, and a host MIL executor that predicts the fp16 drift.

coremltools is imported only inside the functions that need it (extra `farm[coreml]`).

    onnx_graph  load/check the ONNX model        fold      constant subgraphs folded
    table       op type -> lowering function     lower_*   one function per ONNX op
    lowering    the lowering loop and context    unsupported  the import-stage op check
    convert     compile_coreml, the report       report    MIL histograms, casts, spec I/O
    executor    run a MIL program in numpy       kernels   numpy kernels for missing ops
    drift       predict_drift                    placement MLComputePlan (macOS only)
"""

from __future__ import annotations

from pathlib import Path

from farm.compile.coreml.convert import compile_coreml
from farm.compile.coreml.drift import PREDICTION_NOTE, predict_drift
from farm.compile.coreml.fold import fold_constants
from farm.compile.coreml.onnx_graph import load_onnx
from farm.compile.coreml.table import lowering_table
from farm.compile.coreml.unsupported import find_unsupported


def unsupported_ops(model_path: Path) -> list[tuple[str, str]]:
    """(op type, node name) of every node the CoreML lowering cannot take, after constant folding.

    Empty for a `.mlpackage`, which is taken as it is. Needs no coremltools.
    """
    if Path(model_path).suffix == ".mlpackage":
        return []
    return find_unsupported(fold_constants(load_onnx(Path(model_path))), lowering_table())


__all__ = ["PREDICTION_NOTE", "compile_coreml", "predict_drift", "unsupported_ops"]
