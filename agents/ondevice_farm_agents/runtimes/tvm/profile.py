"""TVM's per-kernel profile: the Relax VM's instrument around every kernel call.

A session of its own loads the library with the instrument on (`session.KernelClock`), runs it as
many times as ONNX Runtime's profiled pass does (`profiled_run_count`), and writes the calls it
timed; on a unit, `edge_runner.py --profile-runs` does the same and the host reads the file it
pulled back, by this same code. Each kernel call of a run is one row (the VM calls a kernel once
per call site: a kernel called twice is two rows, `name #2`), named by the kernel's symbol, its op
type the kernel kind the compile recorded beside the artifact (`model.so.kernels.json`:
`fused_conv2d_add_relu`, the ops it fused). The first (cold) run is left out of the median and
mean, as ONNX Runtime's profile is. Times are wall time around each call, so they include the
instrument's own Python callback (a few microseconds a call); the VM's builtins (allocation,
shape checks, reshapes as views) are not kernels and are left out.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ondevice_farm.analysis.profile_runs import DEFAULT_COLD_RUNS, profiled_run_count
from ondevice_farm.runtimes.tvm import KERNELS_SUFFIX, LLVM
from ondevice_farm_agents.base import DeviceRun, OpTiming, RunRequest
from ondevice_farm_agents.runtimes.spec import ProfiledSession

NS_PER_US = 1000.0


def kernel_kinds(artifact: Path) -> dict[str, str]:
    """Kernel symbol -> its kind (`fused_conv2d_add_relu`), as the compile wrote them beside the
    artifact; empty where it wrote none."""
    path = Path(str(artifact) + KERNELS_SUFFIX)
    if not path.is_file():
        return {}
    return {str(k["name"]): str(k["op_type"]) for k in json.loads(path.read_text(encoding="utf-8"))}


def _kind(name: str, kinds: dict[str, str]) -> str:
    """The compile's kind, else the symbol without the shape numbers TVM adds (`conv2d1` -> `conv2d`)."""
    return kinds.get(name) or "_".join(re.sub(r"(?<=[a-z_])\d+$", "", part) for part in name.split("_"))


def calls_to_ops(runs: list[list[Any]], kinds: dict[str, str]) -> list[OpTiming]:
    """One OpTiming per kernel call site, in execution order, over the warm runs (the first left
    out where there are others); times in microseconds."""
    warm = runs[DEFAULT_COLD_RUNS:] or runs
    if not warm:
        return []
    ops: list[OpTiming] = []
    seen: dict[str, int] = {}
    for position, (name, _) in enumerate(warm[0]):
        samples = [run[position][1] / NS_PER_US for run in warm if len(run) > position]
        seen[name] = seen.get(name, 0) + 1
        ops.append(
            OpTiming(
                name=name if seen[name] == 1 else f"{name} #{seen[name]}",
                op_type=_kind(name, kinds),
                provider=LLVM,
                mean_us=statistics.fmean(samples),
                calls=len(samples),
                source="measured",
                median_us=statistics.median(samples),
                runs=len(samples),
            )
        )
    return ops


def profile_kernels(
    request: RunRequest, run: DeviceRun, load_profiled: Callable[[], ProfiledSession]
) -> None:
    """Fill `run.ops` and `run.placement` from the VM's instrument (the registry's `Profiler` of TVM)."""
    session = load_profiled()
    for _ in range(profiled_run_count(request.runs)):
        session.infer()
    with tempfile.TemporaryDirectory(prefix="farm-tvm-profile-") as tmp:
        dump = Path(tmp) / "kernels.json"
        session.write_etdump(dump)
        runs = json.loads(dump.read_text(encoding="utf-8"))["runs"]
    run.ops = calls_to_ops(runs, kernel_kinds(request.artifact))
    run.placement = {op.name: op.provider for op in run.ops}
    run.notes.append(
        "per-op profile: TVM's kernels, timed around each call by the Relax VM's instrument "
        "(set_instrument); median and mean of the warm runs of a profiled session, the first left out"
    )
