"""The FarmRunner contract: the job file the host writes and the result file the app writes.

Both are JSON, checked against the schemas in `runner_contract/` on the host side (and by
the app's own tests on a Mac). Tensors travel as raw little-endian C-order files beside
them. docs/ios-runner.md describes the contract for the people writing the app.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from ondevice_farm.errors import CompileError, DeviceError, DeviceTimeoutError, FarmError, UsageError
from ondevice_farm.targets import Target

JOB_SCHEMA = "job.schema.json"
RESULT_SCHEMA = "result.schema.json"
JOB_SCHEMA_ID = "farm.ios.job/3"
RESULT_SCHEMA_ID = "farm.ios.result/3"

#: farm CoreML backend -> MLComputeUnits case name
COMPUTE_UNITS: dict[str, str] = {
    "all": "all",
    "ane": "cpuAndNeuralEngine",
    "gpu": "cpuAndGPU",
    "cpu": "cpuOnly",
}
#: contract dtype -> numpy dtype (little-endian); MLMultiArray has no int64, so int64 inputs go as int32
DTYPES: dict[str, np.dtype[Any]] = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "float64": np.dtype("<f8"),
    "int32": np.dtype("<i4"),
}
MODEL_FORMATS = {".mlpackage": "mlpackage", ".mlmodel": "mlmodel", ".mlmodelc": "mlmodelc", ".onnx": "onnx"}
_RESULT_HINT = (
    "rebuild FarmRunner from agents/ondevice_farm_agents/ios/FarmRunner for this farm version"
    " (docs/ios-runner.md)"
)


@cache
def schema(name: str) -> dict[str, Any]:
    text = (
        resources.files("ondevice_farm_agents.ios")
        .joinpath("runner_contract")
        .joinpath(name)
        .read_text(encoding="utf-8")
    )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def contract_errors(document: object, schema_name: str) -> list[str]:
    """Every way `document` breaks the schema, as `path: message` lines (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema(schema_name))
    found = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in found]


def compute_units(target: Target) -> str:
    if target.runtime != "coreml" or target.backend not in COMPUTE_UNITS:
        raise UsageError(f"the iOS agent runs CoreML targets only, not {target.name}")
    return COMPUTE_UNITS[target.backend]


def tensor_bytes(array: np.ndarray) -> tuple[str, bytes]:
    """The contract dtype and raw bytes of an input tensor."""
    if array.dtype == np.int64:
        if array.size and (array.min() < np.iinfo(np.int32).min or array.max() > np.iinfo(np.int32).max):
            raise UsageError("an int64 input does not fit in int32, the widest integer CoreML takes")
        array = array.astype(np.int32)
    for name, dtype in DTYPES.items():
        if array.dtype == dtype or array.dtype == dtype.newbyteorder("="):
            return name, np.ascontiguousarray(array, dtype=dtype).tobytes()
    raise UsageError(f"CoreML takes no {array.dtype} inputs (use float32, float16, float64 or int32)")


def inputs_digest(inputs: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(inputs):
        dtype, data = tensor_bytes(inputs[name])
        digest.update(f"{name}\0{dtype}\0{list(inputs[name].shape)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class TensorFile:
    #: the model's feature name
    name: str
    dtype: str
    shape: tuple[int, ...]
    path: str
    #: the source model's name for it, as the job's I/O name map gave it (None: not in the map)
    onnx_name: str | None = None

    def decode(self, data: bytes) -> np.ndarray:
        dtype = DTYPES[self.dtype]
        expected = int(np.prod(self.shape, dtype=np.int64)) * dtype.itemsize
        if len(data) != expected:
            raise DeviceError(
                f"output {self.name!r}: {len(data)} bytes on the phone, {expected} expected for "
                f"{self.dtype}{list(self.shape)}",
                hint=_RESULT_HINT,
            )
        return np.frombuffer(data, dtype=dtype).reshape(self.shape).astype(dtype.newbyteorder("="))

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "onnx_name": self.onnx_name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "path": self.path,
        }


@dataclass(frozen=True)
class PlannedOp:
    name: str
    op_type: str
    preferred_device: str
    supported_devices: tuple[str, ...]
    estimated_cost: float | None


@dataclass(frozen=True)
class RunnerResult:
    """A result file that passed the schema, with status ok."""

    job_id: str
    runner: str
    os_version: str
    #: None: the runner timed no compile step (the host stand-in running an .onnx model)
    compile_ms: float | None
    load_ms: float
    #: a second load of the compiled model, the first still loaded (caches warm)
    warm_load_ms: float
    first_inference_ms: float
    samples_ms: list[float]
    thermal_before: str
    thermal_after: str
    thermal_waited_ms: float
    outputs: list[TensorFile]
    plan_ops: list[PlannedOp] = field(default_factory=list)
    plan_note: str = ""
    peak_footprint_bytes: int | None = None
    #: the phone's wall clock (s since 1970) at the edges of the timed runs and the sustained phase
    timed_span_unix_s: tuple[float, float] | None = None
    #: the timed runs and the untimed ones after them (the job's min_active_s), and their count
    active_span_unix_s: tuple[float, float] | None = None
    active_inferences: int = 0
    sustained_span_unix_s: tuple[float, float] | None = None
    #: the result's `sustained` object as written (`ondevice_farm_agents.ios.sustained` reads it)
    sustained: dict[str, Any] | None = None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _span(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if isinstance(value, list) and len(value) == 2 else None


def parse_result(raw: bytes, job_id: str, where: str) -> RunnerResult:
    """Check a result file against the contract; a runner-reported failure raises its `FarmError`."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DeviceError(f"{where}: the result file is not JSON ({exc})", hint=_RESULT_HINT) from None
    problems = contract_errors(document, RESULT_SCHEMA)
    if problems:
        listed = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
        raise DeviceError(f"{where}: the result file breaks the runner contract: {listed}", hint=_RESULT_HINT)
    if document["job_id"] != job_id:
        raise DeviceError(f"{where}: the result file is for job {document['job_id']}, not {job_id}")
    if document["status"] == "error":
        raise _runner_failure(document["error"]["kind"], document["error"]["message"], where)
    plan = document["compute_plan"]
    ops = [
        PlannedOp(
            name=op["name"],
            op_type=op["op_type"],
            preferred_device=op["preferred_device"],
            supported_devices=tuple(op["supported_devices"]),
            estimated_cost=op.get("estimated_cost"),
        )
        for op in plan.get("ops", [])
    ]
    runner = document["runner"]
    spans = document.get("spans_unix_s") or {}
    return RunnerResult(
        job_id=job_id,
        runner=f"{runner['name']} {runner['version']}",
        os_version=runner["os_version"],
        compile_ms=_number(document["timings_ms"].get("compile")),
        load_ms=float(document["timings_ms"]["load"]),
        warm_load_ms=float(document["timings_ms"]["warm_load"]),
        first_inference_ms=float(document["timings_ms"]["first_inference"]),
        samples_ms=[float(s) for s in document["samples_ms"]],
        thermal_before=document["thermal"]["before"],
        thermal_after=document["thermal"]["after"],
        thermal_waited_ms=float(document["thermal"]["waited_ms"]),
        outputs=[
            TensorFile(o["name"], o["dtype"], tuple(int(d) for d in o["shape"]), o["path"], o["onnx_name"])
            for o in document["outputs"]
        ],
        plan_ops=ops,
        plan_note="" if plan["available"] else str(plan.get("reason", "no compute plan")),
        peak_footprint_bytes=document.get("memory", {}).get("peak_footprint_bytes"),
        timed_span_unix_s=_span(spans.get("timed")),
        active_span_unix_s=_span(spans.get("active")),
        active_inferences=int(document.get("active_inferences") or 0),
        sustained_span_unix_s=_span(spans.get("sustained")),
        sustained=document.get("sustained"),
    )


def _runner_failure(kind: str, message: str, where: str) -> FarmError:
    if kind == "thermal":
        return DeviceTimeoutError(f"{where}: the phone did not cool down in time ({message})")
    if kind == "compile":
        return CompileError(f"{where}: CoreML could not compile the model on the phone ({message})")
    return DeviceError(f"{where}: FarmRunner failed at {kind} ({message})")
