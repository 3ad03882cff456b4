"""Predicting, on the host, the outputs the CoreML artifact will give: the fp16 drift before any iPhone.

The ONNX model is lowered and put through coremltools' passes exactly as for the
artifact, and the resulting MIL program runs in the host executor. In fp32 that
checks the lowering against ONNX Runtime; in fp16 the difference to the fp32
reference is a prediction of the device's drift (storage rounding only: see executor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import CompileError, ModelError, UsageError
from ondevice_farm.runtimes.coreml.compile.convert import (
    DEFAULT_DEPLOYMENT_TARGET,
    CoreMLOptions,
    convert_program,
    import_coremltools,
    lower_checked,
    prepare_graph,
)
from ondevice_farm.runtimes.coreml.compile.executor import ExecutorError, run_program
from ondevice_farm.runtimes.coreml.compile.quantization import DEFAULT_QUANTIZATION

#: what a report should say beside numbers that come from predict_drift()
PREDICTION_NOTE = (
    "predicted on the host by the farm's MIL executor (fp16 storage between ops, fp32 inside them); "
    "not measured on a device"
)


def predict_drift(
    model_path: Path,
    inputs: dict[str, np.ndarray],
    precision: str = "fp16",
    *,
    minimum_deployment_target: str = DEFAULT_DEPLOYMENT_TARGET,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    quantization: str = DEFAULT_QUANTIZATION,
    fixed_inputs: dict[str, float] | None = None,
) -> dict[str, np.ndarray]:
    """Output tensors of the CoreML program for `model_path` at `precision`, by ONNX output name.

    A `.mlpackage` runs as it is, with `inputs` and outputs named as in its spec. Inputs pinned
    with `fixed_inputs` are constants of the program: a value given for them in `inputs` is unused.
    """
    options = CoreMLOptions(
        precision,
        minimum_deployment_target,
        quantization=quantization,
        fixed_inputs=tuple(sorted((fixed_inputs or {}).items())),
    )
    rank0_inputs: set[str] = set()
    rank0_outputs: set[str] = set()
    if Path(model_path).suffix == ".mlpackage":
        program = _load_package_program(Path(model_path))
        names = {name: name for name in program.functions["main"].inputs}
        outputs = [var.name for var in program.functions["main"].outputs]
    else:
        _, graph = prepare_graph(Path(model_path), input_shapes, options)
        lowered = lower_checked(graph, options)
        names = lowered.input_names
        outputs = list(lowered.output_names)
        rank0_inputs, rank0_outputs = set(lowered.rank0_inputs), set(lowered.rank0_outputs)
        program = convert_program(lowered, graph, options, "CPU_ONLY")._mil_program
        names = _as_converted(names, list(program.functions["main"].inputs))
    missing = sorted(set(names) - set(inputs))
    if missing:
        raise UsageError(f"no input given for {', '.join(missing)}")
    try:
        results = run_program(
            program,
            {
                # a scalar input is fed as shape [1], as the job feeds it on the device
                names[name]: np.asarray(value).reshape(1) if name in rank0_inputs else np.asarray(value)
                for name, value in inputs.items()
                if name in names
            },
        )
    except ExecutorError as exc:
        raise CompileError(
            f"the host MIL executor cannot run this program: {exc}",
            hint="the artifact itself is unaffected; only the drift prediction is missing",
        ) from exc
    # coremltools may rename outputs; their order is the graph's.
    return {
        name: value.reshape(()) if name in rank0_outputs else value
        for name, value in zip(outputs, results.values(), strict=True)
    }


def _as_converted(names: dict[str, str], converted: list[str]) -> dict[str, str]:
    """ONNX input name -> the converted program's input name. coremltools renames an input whose
    name MIL reserves (`state` becomes `state_workaround`) and keeps the inputs' order."""
    if set(names.values()) == set(converted) or len(names) != len(converted):
        return names
    return dict(zip(names, converted, strict=True))


def _load_package_program(package: Path) -> Any:
    ct = import_coremltools()
    from coremltools.converters.mil.frontend.milproto.load import load

    try:
        mlmodel = ct.models.MLModel(str(package), skip_model_load=True)
        spec = mlmodel.get_spec()
        return load(spec, spec.specificationVersion, mlmodel.weights_dir)
    except Exception as exc:  # coremltools raises bare Exceptions for unreadable packages
        raise ModelError(f"{package} is not a readable ML Program package: {exc}") from exc
