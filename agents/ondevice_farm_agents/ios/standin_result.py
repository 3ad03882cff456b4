"""What both host stand-ins for FarmRunner write back: the output files and the result's body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ondevice_farm_agents.ios.contract import DTYPES
from ondevice_farm_agents.ios.fakes import AppFiles


def write_outputs(
    files: AppFiles, job: dict[str, Any], outputs: list[tuple[str, str, Any]]
) -> list[dict[str, Any]]:
    """`outputs`: (feature name, contract dtype, value) in order; each written as the app writes it,
    under its ONNX name where the job's I/O name map has one."""
    onnx_names = {o["name"]: o["onnx_name"] for o in job["outputs"]}
    files.makedirs(job["outputs_dir"])
    written = []
    for index, (name, dtype, value) in enumerate(outputs):
        path = f"{job['outputs_dir']}/{index}.bin"
        data = np.ascontiguousarray(np.asarray(value), dtype=DTYPES[dtype])
        files.write(path, data.tobytes())
        written.append(
            {
                "name": name,
                "onnx_name": onnx_names.get(name),
                "dtype": dtype,
                "shape": list(data.shape),
                "path": path,
            }
        )
    return written


def result_body(
    timings_ms: dict[str, float],
    phases: dict[str, Any],
    written: list[dict[str, Any]],
    profiled: Callable[[], list[dict[str, Any]]] | None,
) -> dict[str, Any]:
    """The result's measured part; `profiled`: a callable giving the per-op profile where asked for,
    None where the job's profile_ops was false."""
    plan: dict[str, Any] = (
        {"available": True, "ops": profiled()}
        if profiled is not None
        else {"available": False, "reason": "profile_ops was false"}
    )
    return {
        "timings_ms": timings_ms,
        **phases,
        "outputs": written,
        "compute_plan": plan,
        "memory": {"peak_footprint_bytes": None},
    }
