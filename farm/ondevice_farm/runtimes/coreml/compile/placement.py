"""Per-op compute device and cost from CoreML's MLComputePlan (macOS 14.4+ only).

On Linux coremltools cannot load a model, so this module is only called on macOS;
on a phone the iOS agent reads the same plan on the device.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: MLComputeDevice class name -> the device name the farm reports
DEVICE_NAMES: dict[str, str] = {
    "MLNeuralEngineComputeDevice": "ANE",
    "MLGPUComputeDevice": "GPU",
    "MLCPUComputeDevice": "CPU",
}


@dataclass
class ComputePlan:
    #: device -> MIL op count
    device_counts: dict[str, int] = field(default_factory=dict)
    #: MIL op (its first output's name) -> preferred device
    op_devices: dict[str, str] = field(default_factory=dict)
    #: MIL op -> estimated share of the model's run time, 0..1
    op_costs: dict[str, float] = field(default_factory=dict)
    error: str = ""


def compute_plan(package: Path, compute_units: str) -> ComputePlan:
    """The plan CoreML makes for `package` on this Mac; an empty plan with `error` where it cannot."""
    import coremltools as ct
    from coremltools.models.compute_plan import MLComputePlan

    try:
        model = ct.models.MLModel(str(package), compute_units=ct.ComputeUnit[compute_units])
        plan = MLComputePlan.load_from_path(
            path=model.get_compiled_model_path(), compute_units=ct.ComputeUnit[compute_units]
        )
    except Exception as exc:  # the CoreML framework reports failures as bare Exceptions
        return ComputePlan(error=str(exc))
    program = plan.model_structure.program
    if program is None:
        return ComputePlan(error="the model is not an ML Program")
    result = ComputePlan()
    counts: Counter[str] = Counter()
    for op in program.functions["main"].block.operations:
        if op.operator_name == "const":
            continue
        name = op.outputs[0].name if op.outputs else op.operator_name
        usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
        if usage is not None:
            device = DEVICE_NAMES.get(type(usage.preferred_compute_device).__name__, "CPU")
            result.op_devices[name] = device
            counts[device] += 1
        cost = plan.get_estimated_cost_for_mlprogram_operation(op)
        if cost is not None:
            result.op_costs[name] = float(cost.weight)
    result.device_counts = dict(counts)
    return result
