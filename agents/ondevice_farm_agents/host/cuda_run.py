"""One job on the host's GPU through ONNX Runtime's CUDA provider, measured the way the CPU is.

Timing: `session.run` with NumPy inputs returns only after ORT has synchronised the CUDA stream
at the end of the run (the default; `disable_synchronize_execution_providers` is never set), so
the wall-clock time around the call covers the GPU work, plus the copy of the inputs to the GPU
and of the outputs back. With IO binding the inputs are placed on the GPU once, before timing,
and the outputs stay there: the samples then leave those two copies out. The notes say which.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.profile_runs import DEFAULT_COLD_RUNS, profiled_run_count, record_profile
from ondevice_farm.analysis.transfers import transfer_report
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm_agents.base import WARM_LOAD_SAME_PROCESS, DeviceRun, RunRequest
from ondevice_farm_agents.host.cuda import CUDA_PROVIDER, INSTALL_HINT, CudaOptions, load_cuda_libraries
from ondevice_farm_agents.host.fallback_probe import probe_cpu_fallback
from ondevice_farm_agents.host.memory import PeakMemory

NS_PER_MS = 1e6
#: provider options worth repeating in the notes: they change numbers or first-run time
REPORTED_OPTIONS = ("device_id", "use_tf32", "cudnn_conv_algo_search", "prefer_nhwc", "enable_cuda_graph")

MEMORY_NOTE = (
    "memory: peak_memory_mb is host RSS; onnxruntime's Python API does not expose the CUDA arena's "
    "device memory (benchmarks/cuda_check.sh samples nvidia-smi)"
)
#: (request, profile directory or None) -> onnxruntime.SessionOptions, shared with the CPU path
SessionOptionsFactory = Callable[[RunRequest, Path | None], Any]


class _HostIo:
    """`session.run` with NumPy in and out: what an application without IO binding does."""

    def __init__(self, session: Any, inputs: dict[str, np.ndarray], names: list[str]) -> None:
        self.session, self.inputs, self.names = session, inputs, names
        self.last: list[Any] = []

    def run(self) -> None:
        self.last = self.session.run(self.names, self.inputs)

    def outputs(self) -> dict[str, np.ndarray]:
        return {n: np.asarray(v) for n, v in zip(self.names, self.last, strict=True)}


class _DeviceIo:
    """IO binding: inputs copied to the GPU once, outputs left on the GPU until the end."""

    def __init__(self, session: Any, inputs: dict[str, np.ndarray], names: list[str], device_id: int) -> None:
        import onnxruntime as ort

        self.names = names
        self.session = session
        self.binding = session.io_binding()
        self._keep: list[Any] = []  # the bound OrtValues must outlive the binding
        for name, array in inputs.items():
            value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", device_id)
            self._keep.append(value)
            self.binding.bind_ortvalue_input(name, value)
        for name in names:
            self.binding.bind_output(name, "cuda", device_id)

    def run(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def outputs(self) -> dict[str, np.ndarray]:
        return {n: np.asarray(v) for n, v in zip(self.names, self.binding.copy_outputs_to_cpu(), strict=True)}


def _create(request: RunRequest, options: Any, cuda: CudaOptions) -> Any:
    import onnxruntime as ort

    if CUDA_PROVIDER not in ort.get_available_providers():
        raise UsageError(
            f"{request.target} needs {CUDA_PROVIDER}, which this host's onnxruntime lacks", hint=INSTALL_HINT
        )
    load_cuda_libraries()
    try:
        session = ort.InferenceSession(str(request.artifact), options, providers=cuda.providers())
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DeviceError(f"onnxruntime could not load the model on CUDA: {first_line}") from None
    if session.get_providers()[:1] != [CUDA_PROVIDER]:
        raise DeviceError(
            f"{CUDA_PROVIDER} did not start (the session runs on {session.get_providers()}): "
            "check the CUDA and cuDNN libraries with `farm devices`"
        )
    return session


def _option_notes(session: Any, cuda: CudaOptions) -> list[str]:
    reported = session.get_provider_options().get(CUDA_PROVIDER, {})
    shown = ", ".join(f"{k}={reported[k]}" for k in REPORTED_OPTIONS if k in reported)
    tf32 = str(reported.get("use_tf32", "1" if cuda.use_tf32 else "0"))
    notes = [f"cuda provider options: {shown or 'none reported by onnxruntime'}"]
    if tf32 == "1":
        notes.append(
            "precision: TF32 on (use_tf32=1): on Ampere and newer GPUs fp32 MatMul/Conv/Gemm round "
            "their inputs to a 10-bit mantissa, so ~1e-3 relative drift from the fp32 CPU reference "
            "is expected; cuda_use_tf32=0 gives full fp32"
        )
    else:
        notes.append("precision: TF32 off (use_tf32=0): fp32 kernels in full fp32")
    notes.append("precision: the CUDA provider computes in the model's own types; it adds no fp16 casts")
    if reported.get("cudnn_conv_algo_search", "EXHAUSTIVE") == "EXHAUSTIVE":
        notes.append("first inference includes cuDNN's exhaustive convolution algorithm search")
    return notes


def _timing_note(io_binding: bool) -> str:
    if io_binding:
        return (
            "latency: IO binding on: inputs placed on the GPU before timing, outputs left on the GPU; "
            "samples exclude graph input/output copies (ORT synchronises the stream at the end of each "
            "run)"
        )
    return (
        "latency: session.run with host arrays: ORT synchronises the CUDA stream before returning, so "
        "samples include the GPU work and the input/output copies"
    )


def _profile(
    request: RunRequest,
    options_for: SessionOptionsFactory,
    cuda: CudaOptions,
    names: list[str],
    run: DeviceRun,
) -> None:
    with tempfile.TemporaryDirectory(prefix="farm-profile-") as tmp:
        session = _create(request, options_for(request, Path(tmp)), cuda)
        io = (
            _DeviceIo(session, request.inputs, names, cuda.device_id)
            if cuda.io_binding
            else _HostIo(session, request.inputs, names)
        )
        for _ in range(profiled_run_count(request.runs)):
            io.run()
        events: list[dict[str, Any]] = json.loads(Path(session.end_profiling()).read_text())
    runs = record_profile(run, events)
    run.notes.append(transfer_report(run.ops, CUDA_PROVIDER).summary())
    if len(runs) > DEFAULT_COLD_RUNS:
        cold, warm = runs[0].node_us, [r.node_us for r in runs[DEFAULT_COLD_RUNS:]]
        run.notes.append(
            f"per-op profile: mean of {len(warm)} warm profiled runs; the first run of the profiled "
            f"session ({cold / 1000:.1f} ms of node time, against {min(warm) / 1000:.2f}-"
            f"{max(warm) / 1000:.2f} ms warm) is left out"
        )


def run_cuda(
    request: RunRequest, cuda: CudaOptions, options_for: SessionOptionsFactory, runner: str
) -> DeviceRun:
    with PeakMemory() as peak:
        start = time.perf_counter_ns()
        session = _create(request, options_for(request, None), cuda)
        load_ns = time.perf_counter_ns() - start
        names = [o.name for o in session.get_outputs()]
        io = (
            _DeviceIo(session, request.inputs, names, cuda.device_id)
            if cuda.io_binding
            else _HostIo(session, request.inputs, names)
        )
        start = time.perf_counter_ns()
        io.run()
        first_ns = time.perf_counter_ns() - start
        first = io.outputs()
        for _ in range(request.warmup):
            io.run()
        samples: list[float] = []
        for _ in range(request.runs):
            start = time.perf_counter_ns()
            io.run()
            samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
        notes = [_timing_note(cuda.io_binding), *_option_notes(session, cuda)]
    del io, session
    # a second session right after the first: CUDA context, cuDNN handles and the page cache warm
    start = time.perf_counter_ns()
    warm = _create(request, options_for(request, None), cuda)
    warm_load_ns = time.perf_counter_ns() - start
    del warm
    run = DeviceRun(
        load_ms=load_ns / NS_PER_MS,
        first_inference_ms=first_ns / NS_PER_MS,
        samples_ms=samples,
        outputs=first,
        peak_memory_bytes=peak.bytes,
        runner=runner,
        notes=[*notes, MEMORY_NOTE],
        peak_memory_kind="rss_delta",
        warm_load_ms=warm_load_ns / NS_PER_MS,
        warm_load_method=WARM_LOAD_SAME_PROCESS,
    )
    if request.profile_ops:
        _profile(request, options_for, cuda, names, run)
    probe = probe_cpu_fallback(request.artifact, CUDA_PROVIDER, cuda.provider_options())
    run.notes.append(probe.note(CUDA_PROVIDER))
    return run
