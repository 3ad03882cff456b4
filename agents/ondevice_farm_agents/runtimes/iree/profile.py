"""IREE's per-dispatch profile: the HAL's own profiling, recorded by IREE's benchmark runner.

IREE's Python bindings refuse HAL profiling (`begin_profiling`: "requires a profile sink and is
not exposed by the runtime bindings"), so the profile comes from the runtime wheel's
`iree-benchmark-module`: the same module, the same driver and inputs, run as many times as ONNX
Runtime's profiled pass (`profiled_run_count`) with `--device_profiling_mode` on, the bundle read
back by `iree-profile dispatch --format=jsonl --dispatch_events`. On the CPU (`local-sync`) each
dispatch's time is a host-execution event (the HAL's clock around the dispatch's workgroups); on
Vulkan it is the device's timestamps around the dispatch (on lavapipe, the CPU running it). Each
dispatch is one `OpTiming`, named as the compile report names it, its op type what it computes in
ONNX's words (`Conv+Relu`, from the dispatches written beside the artifact) or IREE's kind; the
first (cold) run is left out of the median and mean, as ONNX Runtime's profile is.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.profile_runs import DEFAULT_COLD_RUNS, profiled_run_count
from ondevice_farm.runtimes.iree import DISPATCHES_SUFFIX, SPEC
from ondevice_farm.runtimes.iree.dispatches import Dispatch, dispatch_kind, short_name
from ondevice_farm_agents.base import DeviceRun, OpTiming, RunRequest
from ondevice_farm_agents.host.edge_run import input_order
from ondevice_farm_agents.runtimes.iree.session import DRIVERS, ENTRY, device_label
from ondevice_farm_agents.runtimes.spec import ProfiledSession

#: the HAL profiling data each driver records per dispatch (Vulkan has no host-execution events)
MODES = {"cpu": "host-execution,executable-metadata", "vulkan": "dispatch-events,executable-metadata"}
#: the event records of `iree-profile dispatch --dispatch_events`: the CPU's, the device's
EVENT_TYPES = frozenset({"host_dispatch_event", "dispatch_event"})
NS_PER_US = 1e3


def tool(name: str) -> str:
    """An IREE tool of the runtime wheel: beside this Python's scripts, else on PATH."""
    found = shutil.which(name, path=sysconfig.get_path("scripts")) or shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} (iree-base-runtime's tools) is not installed here")
    return found


def record(request: RunRequest, runs: int, bundle: Path, folder: Path) -> None:
    """`iree-benchmark-module` with HAL profiling on: `runs` calls of the module into `bundle`."""
    inputs = []
    for index, name in enumerate(input_order(request)):
        path = folder / f"input_{index}.npy"
        np.save(path, np.ascontiguousarray(request.inputs[name]))
        inputs.append(f"--input=@{path}")
    backend = request.target.backend
    argv = [
        tool("iree-benchmark-module"),
        f"--module={request.artifact}",
        f"--device={DRIVERS[backend]}",
        f"--function={ENTRY}",
        *inputs,
        f"--device_profiling_mode={MODES[backend]}",
        f"--device_profiling_output={bundle}",
        f"--benchmark_min_time={runs}x",  # exactly `runs` calls, no time-based repetition
    ]
    affinity = list(request.cpu_affinity) if request.cpu_affinity else None
    subprocess.run(
        argv,
        capture_output=True,
        check=True,
        timeout=request.timeout_s,
        preexec_fn=(lambda: os.sched_setaffinity(0, affinity)) if affinity else None,
    )


def dispatch_events(bundle: Path) -> list[dict[str, Any]]:
    """Every valid dispatch event of the bundle, in the order the profile lists them."""
    done = subprocess.run(
        [tool("iree-profile"), "dispatch", "--format=jsonl", "--dispatch_events", str(bundle)],
        capture_output=True,
        check=True,
        text=True,
        timeout=120,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [e for e in events if e.get("type") in EVENT_TYPES and e.get("valid", True)]


def written_dispatches(artifact: Path) -> dict[str, Dispatch]:
    """The dispatches the compile wrote beside the artifact, by name; none where it wrote none."""
    path = Path(str(artifact) + DISPATCHES_SUFFIX)
    if not path.is_file():
        return {}
    return {d.name: d for d in map(Dispatch.from_json, json.loads(path.read_text(encoding="utf-8")))}


def events_to_ops(
    events: list[dict[str, Any]], runs: int, known: dict[str, Dispatch], provider: str
) -> list[OpTiming]:
    """One OpTiming per dispatch, in the order the dispatches first ran. A dispatch that runs k
    times per call (IREE reuses an executable for identical regions) has k events per run: its
    time in a run is their sum. Times in microseconds, over the warm runs."""
    by_key: dict[str, list[float]] = {}
    for event in events:
        by_key.setdefault(str(event["key"]), []).append(float(event["duration_ns"]) / NS_PER_US)
    ops = []
    for key, durations in by_key.items():
        per_run = len(durations) // runs if len(durations) % runs == 0 else 1
        totals = [sum(durations[i : i + per_run]) for i in range(0, len(durations), per_run)]
        warm = totals[DEFAULT_COLD_RUNS:] or totals
        name = short_name(key)
        dispatch = known.get(name)
        ops.append(
            OpTiming(
                name=name,
                op_type=dispatch.label if dispatch else dispatch_kind(key),
                provider=provider,
                mean_us=statistics.fmean(warm),
                calls=len(warm) * per_run,
                source="measured",
                median_us=statistics.median(warm),
                runs=len(warm),
            )
        )
    return ops


def software_vulkan_note() -> str | None:
    """Where the Vulkan device is lavapipe, a line that says its timings are a CPU's."""
    rt = importlib.import_module("iree.runtime")
    try:
        devices = rt.get_driver("vulkan").query_available_devices()
    except Exception:  # no device: the session refused the job before this
        return None
    name = str(devices[0].get("name", "")) if devices else ""
    if "llvmpipe" not in name:
        return None
    return f"iree/vulkan ran on {device_label(name)}: its timings and dispatch times are a CPU's"


def profile_dispatches(
    request: RunRequest, run: DeviceRun, load_profiled: Callable[[], ProfiledSession]
) -> None:
    """Fill `run.ops` and `run.placement` from IREE's HAL profile of the module (the registry's
    `Profiler` of IREE; `load_profiled` is not used: the bindings cannot profile)."""
    runs = profiled_run_count(request.runs)
    backend = request.target.backend
    provider = SPEC.backend(backend).native
    software = software_vulkan_note() if backend == "vulkan" else None
    if software:  # beside the job's timings wherever its notes show (`farm show`, the report)
        run.notes.append(software)
    try:
        with tempfile.TemporaryDirectory(prefix="farm-iree-profile-") as tmp:
            bundle = Path(tmp) / "profile.ireeprof"
            record(request, runs, bundle, Path(tmp))
            events = dispatch_events(bundle)
    except (OSError, subprocess.SubprocessError) as exc:
        stderr = getattr(exc, "stderr", None)
        reason = (str(stderr or "").strip().splitlines() or [str(exc)])[-1]
        run.notes.append(f"per-op profile: none; IREE's profiling run failed: {reason[:300]}")
        return
    run.ops = events_to_ops(events, runs, written_dispatches(request.artifact), provider)
    run.placement = {op.name: op.provider for op in run.ops}
    clock = (
        "the HAL's host-execution events around each dispatch's workgroups"
        if backend == "cpu"
        else "the Vulkan device's timestamps around each dispatch"
    )
    run.notes.append(
        f"per-op profile: IREE's dispatches timed by {clock}, recorded by iree-benchmark-module "
        f"on the same module and driver ({DRIVERS[backend]}): {runs} calls, the first left out "
        "(IREE's Python bindings expose no HAL profiling)"
    )
