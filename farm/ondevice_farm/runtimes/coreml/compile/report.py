"""What the CoreML compile did, in the shape of the ONNX Runtime compile report."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

#: said on every CoreML report made off the device
PLACEMENT_NOTE = (
    "per-op placement (ANE/GPU/CPU) is known only on the device: MLComputePlan needs "
    "macOS 14.4+/iOS 17.4+, and the iOS agent reports it with each run"
)
FP16_NOTE = (
    "an ML Program computes in fp16 by default: expect drift against an fp32 reference "
    "(once a run has this target, `farm report RUN_ID` sets the device's SNR beside what fp16 "
    "rounding alone gives on the host)"
)


def mil_histogram(program: Any) -> Counter[str]:
    """MIL op types of `main`, constants left out (ONNX initializers are not nodes either)."""
    return Counter(op.op_type for op in program.functions["main"].operations if op.op_type != "const")


def mil_casts(program: Any) -> list[dict[str, str]]:
    """Every cast in `main`: which tensor, from which dtype to which."""
    from coremltools.converters.mil.mil import types

    casts = []
    for op in program.functions["main"].operations:
        if op.op_type == "cast":
            casts.append(
                {
                    "op": op.name,
                    "input": op.x.name,
                    "from": types.builtin_to_string(op.x.dtype),
                    "to": str(op.dtype.val),
                }
            )
    return casts


def spec_io(spec: Any) -> dict[str, list[dict[str, Any]]]:
    """Inputs and outputs of a CoreML model spec, with dtype, default shape and flexible ranges."""
    from coremltools.proto import FeatureTypes_pb2

    def describe(feature: Any) -> dict[str, Any]:
        array = feature.type.multiArrayType
        entry: dict[str, Any] = {
            "name": feature.name,
            "dtype": FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(array.dataType).lower(),
            "shape": [int(d) for d in array.shape],
        }
        ranges = [(int(r.lowerBound), int(r.upperBound)) for r in array.shapeRange.sizeRanges]
        if any(low != high for low, high in ranges):
            entry["shape_ranges"] = ranges
        return entry

    return {
        "inputs": [describe(f) for f in spec.description.input],
        "outputs": [describe(f) for f in spec.description.output],
    }


def spec_op_histogram(spec: Any) -> Counter[str]:
    """MIL op types of a saved ML Program's `main`, constants left out."""
    function = spec.mlProgram.functions["main"]
    block = function.block_specializations[function.opset]
    return Counter(op.type for op in block.operations if op.type != "const")


def spec_precision(spec: Any) -> str:
    """fp16 when any op of `main` yields an fp16 tensor, else fp32."""
    from coremltools.proto import MIL_pb2

    fp16 = MIL_pb2.DataType.Value("FLOAT16")
    function = spec.mlProgram.functions["main"]
    block = function.block_specializations[function.opset]
    for op in block.operations:
        if op.type != "const" and any(out.type.tensorType.dataType == fp16 for out in op.outputs):
            return "fp16"
    return "fp32"


def tree_sha256(path: Path) -> str:
    """One digest for a directory artifact (an .mlpackage): relative paths and contents, sorted."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def package_bytes(path: Path) -> int:
    """Size of a directory artifact (an .mlpackage) on disk: its files' bytes."""
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())
