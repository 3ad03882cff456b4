"""A generation job on the host: onnxruntime-genai in a fresh process (generate_session.py), measured.

Each session is a process of its own, so its cold load is that process's first and its peak
memory (VmHWM) is its own; the job's first session brings the outputs (tokens, first-step
logits) and every timing, a repeat's session its per-token decode latencies.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.generate.trace import (
    FIRST_STEP_LOGITS_OUTPUT,
    TOKENS_OUTPUT,
    GenerationPlan,
    GenerationRep,
    GenerationTrace,
    KvCacheSize,
)
from ondevice_farm_agents.base import WARM_LOAD_SAME_PROCESS, DeviceRun, RunRequest

#: the script one session runs in, a fresh process (see its docstring)
GENERATE_SCRIPT = Path(__file__).resolve().parent / "generate_session.py"

#: (stdin text, timeout in seconds) -> (stdout, stderr, exit status); the agent's, so a cancel kills it
SessionProcess = Callable[[list[str], str, float], tuple[str, str, int]]


def _spec(request: RunRequest, plan: GenerationPlan, outputs: Path) -> dict[str, Any]:
    return {
        "model_dir": str(request.artifact),
        "prompt_ids": list(plan.prompt_ids),
        "decode_tokens": plan.decode_tokens,
        "depths": list(plan.depths),
        "depth_ids": list(plan.depth_ids),
        "reps": plan.reps,
        "warmup": plan.warmup,
        "threads": request.intra_op_threads,
        "outputs": str(outputs),
    }


def _plan(request: RunRequest) -> GenerationPlan:
    if request.generation is None:
        raise UsageError("not a generation job")
    if not (request.artifact / "genai_config.json").is_file():
        raise DeviceError(f"{request.artifact} is not an ONNX Runtime GenAI folder (no genai_config.json)")
    return request.generation


def _session(
    request: RunRequest, plan: GenerationPlan, start: SessionProcess, name: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with tempfile.TemporaryDirectory(prefix="farm-generate-") as tmp:
        spec = _spec(request, plan, Path(tmp))
        argv = [sys.executable, str(GENERATE_SCRIPT), str(os.getpid())]
        stdout, stderr, returncode = start(argv, json.dumps(spec), request.timeout_s)
        if returncode != 0:
            reason = (stderr.strip().splitlines() or ["no message"])[-1]
            if "No module named 'onnxruntime_genai'" in reason:
                raise UsageError(
                    f"{name}: generation jobs need onnxruntime-genai on the agent's host",
                    hint="pip install onnxruntime-genai==0.18.0",
                )
            raise DeviceError(f"{name}: the generation session failed: {reason}")
        with np.load(Path(tmp) / "outputs.npz") as npz:
            outputs = {key: np.array(npz[key]) for key in npz.files}
    return json.loads(stdout), outputs


def _rep(value: dict[str, Any]) -> GenerationRep:
    return GenerationRep(
        depth=int(value["depth"]),
        prefill_ms=float(value["prefill_ms"]),
        first_token_ms=float(value["first_token_ms"]),
        token_ms=[float(v) for v in value["token_ms"]],
        decode_span_ms=float(value["decode_span_ms"]),
        depth_prefill_ms=float(value.get("depth_prefill_ms") or 0.0),
    )


def _kv_cache(value: dict[str, Any] | None) -> KvCacheSize | None:
    if not value:
        return None
    return KvCacheSize(
        bytes=int(value["bytes"]),
        context_tokens=int(value["context_tokens"]),
        source=str(value["source"]),
        formula=str(value.get("formula") or ""),
        shape=tuple(int(v) for v in value.get("shape") or ()),
        layers=int(value.get("layers") or 0),
        dtype=str(value.get("dtype") or ""),
    )


def token_samples_ms(trace: GenerationTrace) -> list[float]:
    """The per-token decode latencies of the first depth's timed generations: the job's samples."""
    first_depth = trace.reps[0].depth if trace.reps else 0
    return [t for rep in trace.reps if rep.depth == first_depth for t in rep.token_ms]


def run_generation(request: RunRequest, start: SessionProcess, name: str) -> DeviceRun:
    """The job's first session: timings, outputs, memory."""
    plan = _plan(request)
    result, outputs = _session(request, plan, start, name)
    trace = GenerationTrace(
        prompt_tokens=plan.prompt_tokens,
        decode_tokens=plan.decode_tokens,
        reps=[_rep(r) for r in result["reps"]],
        runtime=str(result["runtime"]),
        first_ttft_ms=float(result["first_ttft_ms"]),
        kv_cache=_kv_cache(result.get("kv_cache")),
        rss_before_bytes=result.get("rss_before_bytes"),
        rss_peak_bytes=result.get("rss_peak_bytes"),
    )
    before, peak = trace.rss_before_bytes, trace.rss_peak_bytes
    return DeviceRun(
        load_ms=float(result["load_ms"]),
        first_inference_ms=float(result["first_ttft_ms"]),
        samples_ms=token_samples_ms(trace),
        outputs={
            TOKENS_OUTPUT: outputs[TOKENS_OUTPUT].astype(np.int32),
            FIRST_STEP_LOGITS_OUTPUT: outputs[FIRST_STEP_LOGITS_OUTPUT].astype(np.float32),
        },
        peak_memory_bytes=None if before is None or peak is None else max(0, peak - before),
        peak_memory_kind="rss_delta",
        runner=trace.runtime,
        warm_load_ms=float(result["warm_load_ms"]),
        warm_load_method=WARM_LOAD_SAME_PROCESS,
        generation=trace,
    )


def measure_generation_session(request: RunRequest, start: SessionProcess, name: str) -> list[float]:
    """A repeat: another fresh process's per-token decode latencies (its own load and warm-up)."""
    plan = _plan(request)
    result, _ = _session(request, plan, start, name)
    trace = GenerationTrace(plan.prompt_tokens, plan.decode_tokens, [_rep(r) for r in result["reps"]], "")
    return token_samples_ms(trace)
