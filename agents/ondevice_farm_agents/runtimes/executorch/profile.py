"""ExecuTorch's per-op profile: ETDump events read back by the devtools' Inspector.

A session of its own loads the program with ETDump on (`enable_etdump=True`), runs it as many
times as ONNX Runtime's profiled pass does (`profiled_run_count`), and writes the dump; on a unit,
`edge_runner.py --profile-runs` does the same and the host reads the dump it pulled back, by this
same code. The Inspector reads it with the ETRecord the compile wrote beside the artifact (it names
each delegated op), or without one (the events keep the runtime's own names). Each operator event
gives one `OpTiming`: portable kernels (`OPERATOR_CALL` events, named by their op) and the
delegate's calls or, where XNNPACK logs them, its ops; the first (cold) run of the profiled session
is left out of the means, as ONNX Runtime's profile is. Times are measured by the runtime's clock.
"""

from __future__ import annotations

import importlib
import re
import statistics
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ondevice_farm.analysis.profile_runs import DEFAULT_COLD_RUNS, profiled_run_count
from ondevice_farm.runtimes.executorch import ETRECORD_SUFFIX
from ondevice_farm_agents.base import DeviceRun, OpTiming, RunRequest
from ondevice_farm_agents.runtimes.spec import ProfiledSession

#: events that frame the kernels (a method's run, a delegate call, an operator call around its
#: kernel): left out, the kernels inside them are the table
FRAMEWORK_EVENTS = frozenset(
    {"Method::init", "Program::load_method", "Method::execute", "DELEGATE_CALL", "OPERATOR_CALL"}
)
#: the Inspector's block of the profiled runs (the others hold the load)
EXECUTE_BLOCK = "Execute"
XNNPACK = "XNNPACK"
PORTABLE = "portable"


def etrecord_beside(artifact: Path) -> Path | None:
    path = artifact.with_name(artifact.name + ETRECORD_SUFFIX)
    return path if path.is_file() else None


def _warm(raw: list[float]) -> list[float]:
    """The runs of the profiled session without the first (cold) one, where there are others."""
    return raw[DEFAULT_COLD_RUNS:] or raw


def kernel_op_type(event: Any) -> str:
    """`aten.mean.dim` for a portable kernel (from the ETRecord; else its kernel name `mean.out`);
    XNNPACK's own op name without its counter (`Convolution (NHWC, F32) IGEMM`) for a delegated one.

    A kernel's debug handle may name several graph nodes (a Linear lowered to `permute_copy` and
    `addmm` gives `native_call_addmm.out` both): the one whose op the kernel is named after wins."""
    op_types = [str(t) for t in getattr(event, "op_types", None) or []]
    kernel = re.sub(r" #\d+$", "", str(event.name)).removeprefix("native_call_")
    if op_types and not event.is_delegated_op:
        base = kernel.split(".")[0]  # addmm.out -> addmm; aten.addmm.default names it second
        return next((t for t in op_types if t.split(".")[1:2] == [base]), op_types[0])
    return kernel


def events_to_ops(event_blocks: Any) -> list[OpTiming]:
    """One OpTiming per kernel event of the profiled runs, in execution order: XNNPACK's ops inside
    each delegate call (`XNNPACK`) and the portable kernels between them (`portable`); times in
    microseconds (the Inspector's target scale), median and mean over the warm runs."""
    ops: list[OpTiming] = []
    seen: dict[str, int] = {}
    for block in event_blocks:
        if block.name != EXECUTE_BLOCK:
            continue
        for event in block.events:
            perf = getattr(event, "perf_data", None)
            if perf is None or event.name in FRAMEWORK_EVENTS or not list(perf.raw):
                continue
            warm = _warm([float(v) for v in perf.raw])
            name = str(event.name)
            # a portable kernel's name repeats where its op runs twice (two `native_call_add.out`)
            seen[name] = seen.get(name, 0) + 1
            ops.append(
                OpTiming(
                    name=name if seen[name] == 1 else f"{name} #{seen[name]}",
                    op_type=kernel_op_type(event),
                    provider=XNNPACK if event.is_delegated_op else PORTABLE,
                    mean_us=statistics.fmean(warm),
                    calls=len(warm),
                    source="measured",
                    # one slow run (a preempted thread) moves the mean, not the median
                    median_us=statistics.median(warm),
                    runs=len(warm),
                )
            )
    return ops


def profile_etdump(request: RunRequest, run: DeviceRun, load_profiled: Callable[[], ProfiledSession]) -> None:
    """Fill `run.ops` and `run.placement` from an ETDump of a profiled session (the registry's
    `Profiler` of ExecuTorch)."""
    session = load_profiled()
    for _ in range(profiled_run_count(request.runs)):
        session.infer()
    inspector_module = importlib.import_module("executorch.devtools")
    with tempfile.TemporaryDirectory(prefix="farm-etdump-") as tmp:
        dump = Path(tmp) / "run.etdp"
        session.write_etdump(dump)
        etrecord = etrecord_beside(request.artifact)
        with warnings.catch_warnings():  # the Inspector warns of what an ETDump without a debug buffer lacks
            warnings.simplefilter("ignore")
            inspector = inspector_module.Inspector(
                etdump_path=str(dump),
                etrecord=str(etrecord) if etrecord else None,
                target_time_scale=importlib.import_module("executorch.devtools.inspector").TimeScale.US,
            )
        run.ops = events_to_ops(inspector.event_blocks)
    run.placement = {op.name: op.provider for op in run.ops}
    run.notes.append(
        f"per-op profile: ExecuTorch ETDump through the devtools Inspector"
        f"{' with the ETRecord' if etrecord else ' (no ETRecord beside the artifact: runtime event names)'}"
        f"; median and mean of the warm runs of a profiled session, the first left out"
    )
