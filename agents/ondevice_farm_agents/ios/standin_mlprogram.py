"""The host stand-in's way with an `.mlpackage`: the ML Program itself, run in the farm's MIL executor.

As the Swift app does, it takes the job's inputs by the model's *feature names* (a job that
names a feature the model lacks fails as the app's does, kind `job`), and writes every output
under its feature name with the `onnx_name` the job's output list gives it. So a test through
the stand-in goes through CoreML's renaming (`input.1` -> `input_1`) the way a phone does.

Every number is measured here: "compile" is reading the ML Program from the package, "load"
is building the executor's view of it, predictions are timed runs of the program in numpy. The
"compute plan" is one profiled pass: each MIL op on "CPU", cost = its share of that pass's time.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm_agents.ios.contract import DTYPES
from ondevice_farm_agents.ios.fakes import AppFiles
from ondevice_farm_agents.ios.standin_phases import measured_phases
from ondevice_farm_agents.ios.standin_result import result_body, write_outputs

#: executor output dtype -> the contract dtype it is written as (every float output as float32)
_OUTPUT_DTYPES = {"float16": "float32", "float32": "float32", "float64": "float32", "int32": "int32"}


class JobMismatch(Exception):
    """The job names features the model does not have: the app's `job` error."""


def _materialise(files: AppFiles, remote_dir: str, local: Path) -> Path:
    prefix = remote_dir.strip("/") + "/"
    with files.lock:
        tree = {p[len(prefix) :]: d for p, d in files.files.items() if p.startswith(prefix)}
    if not tree:
        raise FileNotFoundError(f"no model at {remote_dir}")
    root = local / Path(remote_dir).name
    for relative, data in tree.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def _feeds(files: AppFiles, job: dict[str, Any], feature_names: list[str]) -> dict[str, np.ndarray]:
    named = [t["name"] for t in job["inputs"]]
    unknown = [n for n in named if n not in feature_names]
    missing = [n for n in feature_names if n not in named]
    if unknown or missing:
        raise JobMismatch(
            f"the job's inputs {named} do not match the model's input features {feature_names}"
            + (f" (no feature {unknown[0]!r})" if unknown else f" (nothing for {missing[0]!r})")
        )
    return {
        t["name"]: np.frombuffer(files.read(t["path"]), dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
        for t in job["inputs"]
    }


def measure_ml_program(files: AppFiles, job: dict[str, Any]) -> dict[str, Any]:
    """The `ok` part of a result file for an `.mlpackage` job (raises JobMismatch, or anything)."""
    from ondevice_farm.runtimes.coreml.compile.drift import _load_package_program
    from ondevice_farm.runtimes.coreml.compile.executor import run_program

    with tempfile.TemporaryDirectory(prefix="farm-standin-") as scratch:
        # "compile": the package laid out on disk, as MLModel.compileModel(at:) leaves a .mlmodelc
        start = time.perf_counter()
        package = _materialise(files, job["model"]["path"], Path(scratch))
        compile_ms = (time.perf_counter() - start) * 1000.0
        # the weights are read here, whole: the scratch copy may go once this returns
        start = time.perf_counter()
        program = _load_package_program(package)
        load_ms = (time.perf_counter() - start) * 1000.0
        # the warm load: the same package loaded again, the first program still held
        start = time.perf_counter()
        warm = _load_package_program(package)
        warm_load_ms = (time.perf_counter() - start) * 1000.0
        del warm
    function = program.functions["main"]
    feature_names = list(function.inputs)
    feeds = _feeds(files, job, feature_names)
    start = time.perf_counter()
    outputs = run_program(program, feeds)
    first_ms = (time.perf_counter() - start) * 1000.0
    phases = measured_phases(lambda: run_program(program, feeds), job)
    written = write_outputs(
        files,
        job,
        [
            (name, _OUTPUT_DTYPES.get(np.asarray(value).dtype.name, "float32"), value)
            for name, value in outputs.items()
        ],
    )
    timings = {"compile": compile_ms, "load": load_ms, "warm_load": warm_load_ms, "first_inference": first_ms}
    profiled = (lambda: _profiled_ops(program, feeds)) if job["profile_ops"] else None
    return result_body(timings, phases, written, profiled)


def _profiled_ops(program: Any, feeds: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    from ondevice_farm.runtimes.coreml.compile.executor import run_program

    timed: list[tuple[str, str, float]] = []

    def heard(op: Any, seconds: float) -> None:
        if op.op_type != "const":
            timed.append((op.outputs[0].name, op.op_type, seconds))

    run_program(program, feeds, on_op=heard)
    total = sum(s for _, _, s in timed) or 1.0
    return [
        {
            "name": name,
            "op_type": op_type,
            "preferred_device": "CPU",
            "supported_devices": ["CPU"],
            "estimated_cost": seconds / total,
        }
        for name, op_type, seconds in timed
    ]
