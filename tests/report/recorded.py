"""Job documents built from the recorded device outputs in fixtures/recorded (see its README).

Only what a recording holds is filled in; everything else is None, as a device agent would
leave a field it could not measure."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

RECORDED = Path(__file__).parent / "fixtures" / "recorded"
GET_CAPABILITY = re.compile(
    r"Node supported: \[(\d)\] Operator type: \[(\w+)\] index: \[\d+\] name: \[([^\]]+)\]"
)
COMPUTE_PLAN = re.compile(r"\[(\d+)\] (\S+) outputs=\[([^\]]+)\] preferred=(\S+) supported=")
COMPUTE_DEVICES = {
    "MLNeuralEngineComputeDevice": "ANE",
    "MLCPUComputeDevice": "CPU",
    "MLGPUComputeDevice": "GPU",
}


def _base(run_id: str, device: str, target: str, model: str) -> dict[str, Any]:
    return {
        "job_id": f"{run_id}-rec",
        "run_id": run_id,
        "model": {"name": model, "sha256": ""},
        "device": device,
        "unit": "recorded",
        "target": target,
        "status": "ok",
        "error": None,
        "runner": None,
        "latency_ms": None,
        "load_ms": None,
        "first_inference_ms": None,
        "peak_memory_mb": None,
        "reference": None,
        "thermal": {"before": None, "after": None},
        "trace_events": [],
    }


def nnapi_resize_job() -> dict[str, Any]:
    """The S23 Ultra's NNAPI placement of Conv -> Resize, from its GetCapability log."""
    text = (RECORDED / "nnapi_s23ultra_resize_getcapability.log").read_text()
    placement: dict[str, str] = {}
    op_types: dict[str, str] = {}
    for supported, op_type, name in GET_CAPABILITY.findall(text):
        placement[name] = "NnapiExecutionProvider" if supported == "1" else "CPUExecutionProvider"
        op_types[name] = op_type
    fallbacks = [
        {"name": n, "op_type": op_types[n], "provider": p, "mean_us": None, "share": None}
        for n, p in placement.items()
        if p == "CPUExecutionProvider"
    ]
    job = _base("rec-s23-nnapi", "galaxy-s23-ultra", "ort/nnapi", "conv_resize")
    counts: dict[str, int] = {}
    for provider in placement.values():
        counts[provider] = counts.get(provider, 0) + 1
    job.update(
        compile={
            "target": "ort/nnapi",
            "nodes_before": 2,
            "nodes_after": 2,
            "op_types_before": {},
            "op_types_after": {},
            "fusions": [],
            "placement": counts,
            "node_placement": placement,
            "partitions": 2,
            "fallback_ops": [f["name"] for f in fallbacks],
            "precision": "fp32",
            "notes": [],
            "extra": {},
        },
        precision="fp32",
        placement=counts,
        ops=[],
        fallback_ops=fallbacks,
        notes=["placement from the device's verbose GetCapability log; no per-op profile recorded"],
    )
    return job


def nnapi_partition_event() -> dict[str, Any]:
    event: dict[str, Any] = json.loads((RECORDED / "nnapi_partition_event_issue22684.json").read_text())
    return event


def coreml_compute_plan_job() -> dict[str, Any]:
    """The M5 Max's MLComputePlan placement (preferred device per MIL operation)."""
    ops = []
    for _index, op_type, output, preferred in COMPUTE_PLAN.findall(
        (RECORDED / "mlcomputeplan_m5max_voxcpm.txt").read_text()
    ):
        if preferred == "unreported":  # consts: Core ML reports no device for them
            continue
        ops.append(
            {
                "name": output,
                "op_type": op_type,
                "provider": COMPUTE_DEVICES[preferred],
                "mean_us": None,
                "share": None,
            }
        )
    counts: dict[str, int] = {}
    for op in ops:
        counts[op["provider"]] = counts.get(op["provider"], 0) + 1
    precision = "fp16" if all("fp16" in op["name"] for op in ops) else "mixed"
    job = _base("rec-m5max-coreml", "mac-m5-max", "coreml/ane", "voxcpm-excerpt")
    job.update(
        compile={
            "target": "coreml/ane",
            "nodes_before": None,
            "nodes_after": len(ops),
            "op_types_before": {},
            "op_types_after": {},
            "fusions": [],
            "placement": counts,
            "node_placement": {},
            "partitions": 1,
            "fallback_ops": [],
            "precision": precision,
            "notes": [],
            "extra": {},
        },
        precision=precision,
        placement=counts,
        ops=ops,
        fallback_ops=[op for op in ops if op["provider"] == "CPU"],
        notes=["placement from MLComputePlan; no per-op cost recorded"],
    )
    return job


def run_of(job: dict[str, Any], model: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "run_id": job["run_id"],
        "kind": "recorded",
        "model": model or dict(job["model"]),
        "status": "complete",
        "jobs": [job],
    }


def conv_resize_model(path: Path) -> Path:
    """The S23 recording's graph, Conv then a 2D bilinear Resize, under the log's node names."""
    weight = helper.make_tensor("conv.weight", TensorProto.FLOAT, [64, 3, 3, 3], [0.01] * (64 * 3 * 3 * 3))
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, 2.0, 2.0])
    graph = helper.make_graph(
        [
            helper.make_node(
                "Conv",
                ["input_tensor", "conv.weight"],
                ["/conv/Conv_output_0"],
                name="/conv/Conv",
                pads=[1, 1, 1, 1],
            ),
            helper.make_node(
                "Resize", ["/conv/Conv_output_0", "", "scales"], ["output"], name="/Resize", mode="linear"
            ),
        ],
        "conv_resize",
        [helper.make_tensor_value_info("input_tensor", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 64, 64, 64])],
        initializer=[weight, scales],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
