"""A host stand-in for the FarmRunner app, for tests and demos without an iPhone.

It implements the runner contract (docs/ios-runner.md) as the Swift app does. An `.mlpackage`
runs as the compiled ML Program in the farm's MIL executor, under the model's feature names
(`standin_mlprogram.py`: the names CoreML gave, exactly as on the phone); an `.onnx` model runs
with ONNX Runtime's CPU execution provider standing in for CoreML. It reads the job file from
the fake phone's container, waits for a nominal thermal state, loads the model, times real
predictions (and, as the app does, loads the model a second time warm, holds a loaded window
and runs the sustained phase the job asks for: `standin_phases.py`), profiles one pass for the
per-op table, and writes outputs and the result file last, atomically. Every number it reports
is measured on this host, by this process; none is made up. What it cannot do: CoreML, the
Neural Engine, MLComputePlan, `ProcessInfo.thermalState` during the sustained phase, and for an
`.onnx` model a compile step (its result has no `timings_ms.compile`). Its "plan" is ONNX
Runtime's profiled pass (each node on "CPU", cost = its share of the measured time).

`behaviour` scripts the failures the host must survive: `silent` never writes a result,
`malformed` writes one that breaks the contract, `crash` exits without one.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID, IosAgent
from ondevice_farm_agents.ios.contract import DTYPES, JOB_SCHEMA, RESULT_SCHEMA_ID, contract_errors
from ondevice_farm_agents.ios.fakes import THERMAL_STATES, AppFiles, FakePhone, FakeProcess, FakeProvider
from ondevice_farm_agents.ios.standin_mlprogram import JobMismatch, measure_ml_program
from ondevice_farm_agents.ios.standin_phases import measured_phases
from ondevice_farm_agents.ios.standin_result import result_body, write_outputs

STANDIN_NAME = "FarmRunner host stand-in (onnxruntime CPU)"
STANDIN_VERSION = "0.1.0"
BEHAVIOURS = ("normal", "silent", "malformed", "crash")
#: ONNX tensor type -> the contract dtype an output is written as
_ORT_OUTPUT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int32)": "int32",
    "tensor(int64)": "int32",
}
_ORT_INPUT_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
}


class StandInRunner:
    """An `AppProgram` for `FakePhone.programs`; `phone` gives it the thermal state to read."""

    def __init__(self, phone: FakePhone, behaviour: str = "normal", thermal_poll_s: float = 0.01) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {BEHAVIOURS}")
        self._phone = phone
        self._behaviour = behaviour
        self._thermal_poll_s = thermal_poll_s

    def __call__(self, files: AppFiles, arguments: list[str], process: FakeProcess) -> None:
        job = json.loads(files.read(arguments[arguments.index("--farm-job") + 1]))
        if self._behaviour == "crash":
            return
        if self._behaviour == "silent":
            process.killed.wait()
            return
        result = self._run(files, job)
        if self._behaviour == "malformed":
            result["timings_ms"] = {"compile": "fast"}
        _write_atomically(files, job["result_path"], json.dumps(result).encode())
        process.killed.wait()  # an iOS app stays up until the host ends it

    def _run(self, files: AppFiles, job: dict[str, Any]) -> dict[str, Any]:
        header: dict[str, Any] = {
            "schema": RESULT_SCHEMA_ID,
            "job_id": job.get("job_id", "unknown"),
            "runner": {
                "name": STANDIN_NAME,
                "version": STANDIN_VERSION,
                "os_version": platform.platform(),
                "product_type": str(self._phone.lockdown_values.get("ProductType", "")),
            },
        }
        problems = contract_errors(job, JOB_SCHEMA)
        if problems:
            return {**header, "status": "error", "error": {"kind": "job", "message": "; ".join(problems)}}
        waited_ms, before = self._wait_for_thermal(job["thermal"]["wait_for"], job["thermal"]["deadline_s"])
        if before is None:
            wanted, deadline_s = job["thermal"]["wait_for"], job["thermal"]["deadline_s"]
            message = f"thermal state stayed above {wanted} for {deadline_s} s"
            return {**header, "status": "error", "error": {"kind": "thermal", "message": message}}
        if job["model"]["format"] not in ("onnx", "mlpackage"):
            message = f"the host stand-in runs .onnx and .mlpackage models only, not {job['model']['format']}"
            return {**header, "status": "error", "error": {"kind": "compile", "message": message}}
        try:
            if job["model"]["format"] == "mlpackage":
                measured = measure_ml_program(files, job)
            else:
                measured = _measure(files, job)
        except JobMismatch as exc:
            return {**header, "status": "error", "error": {"kind": "job", "message": str(exc)}}
        except Exception as exc:  # the app reports any failure in its result file
            return {**header, "status": "error", "error": {"kind": "predict", "message": str(exc)}}
        return {
            **header,
            "status": "ok",
            "compute_units": job["compute_units"],
            **measured,
            "thermal": {"before": before, "after": self._phone.thermal_state(), "waited_ms": waited_ms},
        }

    def _wait_for_thermal(self, wait_for: str, deadline_s: float) -> tuple[float, str | None]:
        start = time.perf_counter()
        limit = THERMAL_STATES.index(wait_for)
        while True:
            state = self._phone.thermal_state()
            waited_ms = (time.perf_counter() - start) * 1000.0
            if THERMAL_STATES.index(state) <= limit:
                return waited_ms, state
            if waited_ms / 1000.0 >= deadline_s:
                return waited_ms, None
            time.sleep(self._thermal_poll_s)


def _measure(files: AppFiles, job: dict[str, Any]) -> dict[str, Any]:
    import onnxruntime as ort

    model = files.read(job["model"]["path"])
    start = time.perf_counter()
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - start) * 1000.0
    # the warm load: a second session of the same model, the first still open
    start = time.perf_counter()
    warm = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    warm_load_ms = (time.perf_counter() - start) * 1000.0
    del warm
    declared = {i.name: i.type for i in session.get_inputs()}
    feeds = {}
    for tensor in job["inputs"]:
        array = np.frombuffer(files.read(tensor["path"]), dtype=DTYPES[tensor["dtype"]]).reshape(
            tensor["shape"]
        )
        feeds[tensor["name"]] = array.astype(
            _ORT_INPUT_NUMPY.get(declared.get(tensor["name"], ""), array.dtype)
        )
    start = time.perf_counter()
    outputs = session.run(None, feeds)
    first_ms = (time.perf_counter() - start) * 1000.0
    phases = measured_phases(lambda: session.run(None, feeds), job)
    written = write_outputs(
        files,
        job,
        [
            (meta.name, _ORT_OUTPUT_DTYPES.get(meta.type, "float32"), value)
            for meta, value in zip(session.get_outputs(), outputs, strict=True)
        ],
    )
    # no compile step: ONNX Runtime's graph optimisation is part of the session's load, timed there
    timings = {"load": load_ms, "warm_load": warm_load_ms, "first_inference": first_ms}
    profiled = (lambda: _profiled_ops(model, feeds)) if job["profile_ops"] else None
    return result_body(timings, phases, written, profiled)


def _profiled_ops(model: bytes, feeds: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """One profiled pass: each node, where it ran, and its share of the measured node time."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="farm-standin-") as scratch:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(scratch) / "profile")
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
    nodes: dict[str, dict[str, Any]] = {}
    for event in events:
        args = event.get("args", {})
        if event.get("cat") != "Node" or "op_name" not in args or not event["name"].endswith("_kernel_time"):
            continue
        name = event["name"][: -len("_kernel_time")]
        entry = nodes.setdefault(name, {"op_type": args["op_name"], "us": 0.0})
        entry["us"] += float(event.get("dur", 0))
    total = sum(e["us"] for e in nodes.values()) or 1.0
    return [
        {
            "name": name,
            "op_type": entry["op_type"],
            "preferred_device": "CPU",
            "supported_devices": ["CPU"],
            "estimated_cost": entry["us"] / total,
        }
        for name, entry in nodes.items()
    ]


def _write_atomically(files: AppFiles, path: str, data: bytes) -> None:
    files.write(f"{path}.tmp", data)
    files.rename(f"{path}.tmp", path)


def standin_agent(
    settings: AgentSettings,
    lockdown_values: dict[str, Any],
    behaviour: str = "normal",
    bundle_id: str = DEFAULT_BUNDLE_ID,
) -> IosAgent:
    """An `IosAgent` with one fake phone (`lockdown_values`) whose FarmRunner is this stand-in.

    Every argument pickles, so a Ray actor can build its own agent from them.
    """
    phone = FakePhone(lockdown_values)
    phone.programs[bundle_id] = StandInRunner(phone, behaviour)
    phone.install(bundle_id, "1")
    return IosAgent(settings, provider=FakeProvider(phone))
