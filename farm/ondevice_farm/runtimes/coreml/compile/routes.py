"""Two CoreML artifacts of one model set side by side: the ONNX route (`coreml/*`, the farm's
lowering) and the PyTorch route (`coreml-torch/*`, coremltools' frontend).

Both are MIL programs after coremltools' passes, so their op histograms compare directly:
an op one route keeps whole (`gelu`) and the other spells out in several (`erf`, `mul`, `add`)
shows as ops present on one side only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.targets import Target

ROUTE_LABELS = {"onnx": "ONNX route (farm lowering)", "torch": "PyTorch route (coremltools frontend)"}


def _bytes(path: Path) -> int:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


def route_summary(artifact: CompiledArtifact) -> dict[str, Any]:
    report = artifact.report
    ops = dict((report.extra.get("mil_ops_after_passes") or {}).get("op_types") or report.op_types_after)
    return {
        "target": artifact.target.name,
        "mil_ops": sum(ops.values()),
        "op_types": ops,
        "casts": len(report.extra.get("casts") or []),
        "fusions": [f"{f.op_type} {f.before}->{f.after}" for f in report.fusions],
        "precision": report.precision,
        "package_bytes": _bytes(artifact.path),
        "frontend": report.extra.get("frontend", "onnx"),
        "refusals": list(report.extra.get("frontend_refusals") or []),
        "warnings": list(report.extra.get("coremltools_warnings") or []),
        "conversion_s": report.extra.get("conversion_s"),
        "output_dtypes": [str(o.get("dtype")) for o in report.extra.get("outputs") or []],
    }


def compare_routes(onnx_route: CompiledArtifact, torch_route: CompiledArtifact) -> dict[str, Any]:
    """Summaries of both routes and the op types whose counts differ (`onnx`, `torch` per op)."""
    left, right = route_summary(onnx_route), route_summary(torch_route)
    ops = sorted(set(left["op_types"]) | set(right["op_types"]))
    differing = {
        op: {"onnx": left["op_types"].get(op, 0), "torch": right["op_types"].get(op, 0)}
        for op in ops
        if left["op_types"].get(op, 0) != right["op_types"].get(op, 0)
    }
    return {"onnx": left, "torch": right, "op_differences": differing}


def describe_divergence(comparison: dict[str, Any]) -> str:
    """One sentence: which ops only one route has, and how big each program is."""
    diff = comparison["op_differences"]
    only_torch = [f"{op} {c['torch']}" for op, c in diff.items() if c["onnx"] == 0]
    only_onnx = [f"{op} {c['onnx']}" for op, c in diff.items() if c["torch"] == 0]
    left, right = comparison["onnx"], comparison["torch"]
    text = (
        f"coremltools' PyTorch frontend builds {right['mil_ops']} MIL ops, the ONNX route {left['mil_ops']}"
    )
    if only_torch:
        text += f"; only the PyTorch route has {', '.join(only_torch)}"
    if only_onnx:
        text += f"; only the ONNX route has {', '.join(only_onnx)}"
    if left["casts"] != right["casts"]:
        text += f"; casts {right['casts']} vs {left['casts']}"
    if left["output_dtypes"] != right["output_dtypes"]:
        text += (
            f"; outputs {'/'.join(right['output_dtypes'])} from the PyTorch route, "
            f"{'/'.join(left['output_dtypes'])} from the ONNX route"
        )
    return text


def route_pairs(built: dict[Target, CompiledArtifact]) -> dict[str, dict[str, Any]]:
    """backend -> `compare_routes` for every backend compiled by both routes."""
    pairs = {}
    for target, artifact in built.items():
        twin = built.get(target.with_route("torch"))
        if target.runtime == "coreml" and not target.route and twin is not None:
            pairs[target.backend] = compare_routes(artifact, twin)
    return pairs
