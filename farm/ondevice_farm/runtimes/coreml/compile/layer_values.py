"""The intermediate values a CoreML ML Program would compute, predicted on the host.

The model is lowered and put through coremltools' passes as for the artifact, and the host MIL
executor (`executor.run_program`) records every op's output. The lowering names each node's MIL
output after its ONNX tensor (`lowering.mil_name`), so a value maps back to the ONNX tensor
that carries that name; values coremltools' passes fused away, and names that collide after
sanitising, have no counterpart and are left out. In an fp16 program, coremltools' fp16 pass
renames a value it casts as `<name>_cast_fp16`: that is still the value of `<name>`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from ondevice_farm.errors import CompileError, UsageError
from ondevice_farm.runtimes.coreml.compile.convert import (
    CoreMLOptions,
    convert_program,
    lower_checked,
    prepare_graph,
)
from ondevice_farm.runtimes.coreml.compile.executor import ExecutorError, run_program
from ondevice_farm.runtimes.coreml.compile.lowering import mil_name

_CAST_SUFFIXES = ("_cast_fp16", "_cast_fp32")


def predicted_layer_values(
    model_path: Path,
    inputs: dict[str, np.ndarray],
    tensors: list[str],
    precision: str = "fp16",
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray]:
    """ONNX tensor name -> the ML Program's value for it, for those of `tensors` it keeps (fp32)."""
    options = CoreMLOptions(precision)
    _, graph = prepare_graph(Path(model_path), input_shapes)
    lowered = lower_checked(graph, options)
    program = convert_program(lowered, graph, options, "CPU_ONLY")._mil_program
    names = lowered.input_names
    missing = sorted(set(names) - set(inputs))
    if missing:
        raise UsageError(f"no input given for {', '.join(missing)}")
    trace: dict[str, np.ndarray] = {}
    try:
        run_program(program, {names[n]: np.asarray(v) for n, v in inputs.items() if n in names}, trace)
    except ExecutorError as exc:
        raise CompileError(f"the host MIL executor cannot run this program: {exc}") from exc
    for traced in list(trace):
        for suffix in _CAST_SUFFIXES:
            if traced.endswith(suffix):
                trace.setdefault(traced[: -len(suffix)], trace[traced])
    clashes = Counter(mil_name(t) for t in tensors)
    values: dict[str, np.ndarray] = {}
    for tensor in tensors:
        key = mil_name(tensor)
        if clashes[key] == 1 and key in trace:
            values[tensor] = np.asarray(trace[key]).astype(np.float32)
    return values
