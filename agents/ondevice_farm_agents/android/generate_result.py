"""The native generation runner's `result.json`, read into a `DeviceRun` with its `GenerationTrace`.

One reader for every place the runner runs: the Android agent (a unit over ADB, the ADB peer) and
tests/generate/test_native_generate.py (the x86-64 build here, the aarch64 build under qemu-user). The
runner (agents/ondevice_farm_agents/android/native_generate/src/generate_main.cpp) writes the keys
host/generate_session.py prints, with the first generation's tokens and first-step logits inline:

    {runtime, load_ms, warm_load_ms, first_ttft_ms,
     reps: [{depth, depth_prefill_ms, prefill_ms, first_token_ms, token_ms: [...], decode_span_ms}],
     kv_cache: {bytes, context_tokens, source, shape, layers, dtype} | null, kv_cache_error?,
     tokens: [...], first_step_logits: [...], rss_before_bytes?, rss_peak_bytes?}

Every figure in it was timed or read by the runner on the unit (monotonic clock around
onnxruntime-genai's calls, `/proc/self/status`, the cache tensors' shapes), so every one is
`measured`; nothing here fills in a figure the runner did not write. What comes from a device is
checked against the plan it was given: a runner that generated something else is an error, not a
result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ondevice_farm.errors import DeviceError
from ondevice_farm.generate.trace import (
    FIRST_STEP_LOGITS_OUTPUT,
    TOKENS_OUTPUT,
    GenerationPlan,
    GenerationRep,
    GenerationTrace,
    KvCacheSize,
)
from ondevice_farm_agents.base import WARM_LOAD_SAME_PROCESS, DeviceRun


class GenerationResultError(DeviceError):
    """The runner's result.json is not what the plan asked for (malformed, or another build's)."""

    default_hint = (
        "rebuild the generation runner (python -m ondevice_farm_agents.android.native_generate_build, "
        "or the NDK recipe in docs/android.md) and push it again"
    )


def _fail(what: str) -> GenerationResultError:
    return GenerationResultError(f"the generation runner's result: {what}")


def _number(data: dict[str, Any], key: str, where: str = "") -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(f"no valid {where}{key!r}")
    return float(value)


def _count(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(f"{key!r} is not a byte count")
    return value


def _numbers(value: Any, what: str) -> list[float]:
    if not isinstance(value, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        raise _fail(f"{what} is not a list of finite numbers")
    return [float(v) for v in value]


def _rep(value: Any, index: int, plan: GenerationPlan) -> GenerationRep:
    if not isinstance(value, dict):
        raise _fail(f"reps[{index}] is not an object")
    where = f"reps[{index}]."
    token_ms = _numbers(value.get("token_ms"), f"{where}token_ms")
    if len(token_ms) != plan.decode_tokens - 1:  # every token after the first, timed
        raise _fail(f"{where}token_ms has {len(token_ms)} tokens, {plan.decode_tokens - 1} were asked")
    return GenerationRep(
        depth=int(_number(value, "depth", where)),
        prefill_ms=_number(value, "prefill_ms", where),
        first_token_ms=_number(value, "first_token_ms", where),
        token_ms=token_ms,
        decode_span_ms=_number(value, "decode_span_ms", where),
        depth_prefill_ms=_number(value, "depth_prefill_ms", where),
    )


def _kv_cache(value: Any) -> KvCacheSize | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("source") != "measured":
        raise _fail("kv_cache is not a measured cache size")
    shape = value.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise _fail("kv_cache.shape is not a list of dimensions")
    return KvCacheSize(
        bytes=int(_number(value, "bytes", "kv_cache.")),
        context_tokens=int(_number(value, "context_tokens", "kv_cache.")),
        source="measured",  # the runner read the cache tensors' shapes and element types
        shape=tuple(shape),
        layers=int(_number(value, "layers", "kv_cache.")),
        dtype=str(value.get("dtype") or ""),
    )


def _reps(data: dict[str, Any], plan: GenerationPlan) -> list[GenerationRep]:
    listed = data.get("reps")
    if not isinstance(listed, list):
        raise _fail("no 'reps' list")
    reps = [_rep(value, index, plan) for index, value in enumerate(listed)]
    asked = [depth for depth in plan.depths for _ in range(plan.reps)]
    if [rep.depth for rep in reps] != asked:
        raise _fail(f"generations at depths {[r.depth for r in reps]}, {asked} were asked")
    return reps


def _outputs(data: dict[str, Any], plan: GenerationPlan) -> dict[str, np.ndarray]:
    tokens = data.get("tokens")
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in tokens
    ):
        raise _fail("'tokens' is not a list of token ids")
    if len(tokens) != plan.decode_tokens:
        raise _fail(f"{len(tokens)} tokens, {plan.decode_tokens} were asked")
    logits = _numbers(data.get("first_step_logits"), "'first_step_logits'")
    if not logits:
        raise _fail("'first_step_logits' is empty")
    # the runner printed each float32 logit as a double with 17 digits: the cast back is exact
    return {
        TOKENS_OUTPUT: np.asarray(tokens, dtype=np.int32),
        FIRST_STEP_LOGITS_OUTPUT: np.asarray(logits, dtype=np.float32),
    }


def generation_run(data: Any, plan: GenerationPlan) -> DeviceRun:
    """The job's first session as the runner wrote it: timings, outputs, memory, the cache's size."""
    if not isinstance(data, dict):
        raise _fail("not a JSON object")
    reps = _reps(data, plan)
    first_ttft_ms = _number(data, "first_ttft_ms")
    trace = GenerationTrace(
        prompt_tokens=plan.prompt_tokens,
        decode_tokens=plan.decode_tokens,
        reps=reps,
        runtime=str(data.get("runtime") or "farm generation runner"),
        first_ttft_ms=first_ttft_ms,
        kv_cache=_kv_cache(data.get("kv_cache")),
        rss_before_bytes=_count(data, "rss_before_bytes"),
        rss_peak_bytes=_count(data, "rss_peak_bytes"),
    )
    if trace.kv_cache is None and data.get("kv_cache_error"):
        trace.notes.append(f"no KV cache size: the runtime did not return it ({data['kv_cache_error']})")
    before, peak = trace.rss_before_bytes, trace.rss_peak_bytes
    first_depth = reps[0].depth if reps else 0
    return DeviceRun(
        load_ms=_number(data, "load_ms"),
        first_inference_ms=first_ttft_ms,
        # the first depth's per-token decode latencies: the job's samples, as on the host
        samples_ms=[t for rep in reps if rep.depth == first_depth for t in rep.token_ms],
        outputs=_outputs(data, plan),
        # VmHWM above VmRSS before the load, both read by the runner from its own /proc/self/status
        peak_memory_bytes=None if before is None or peak is None else max(0, peak - before),
        peak_memory_kind="rss_delta",
        runner=trace.runtime,
        warm_load_ms=_number(data, "warm_load_ms"),
        warm_load_method=WARM_LOAD_SAME_PROCESS,
        generation=trace,
    )
