"""One generation session in a process of its own: load the model folder, generate, time each call.

The host agent starts this file with its interpreter (`python generate_session.py`), one fresh
process per session, so the cold load is the process's first, the peak resident set is the
session's own, and no allocator or thread state carries over from another job. It imports only
numpy, onnxruntime_genai and session.py's stdlib-only `die_with_parent` (no farm), so what it
costs is the interpreter and the runtime.

What it times, around onnxruntime-genai's own calls (the calls `benchmark_e2e.py` times):
  load        `og.Model(og.Config(dir))`, the first in this process (cold), and once the
              generations are done and that model released, a second one (warm)
  prefill     `generator.append_tokens(prompt)`: the prompt's forward pass
  first token the first `generate_next_token()` after it (picks the token from those logits)
  each token  every later `generate_next_token()`: a one-token forward pass and the pick
At a depth above 0 the cache is first filled with that many tokens (`append_tokens`, untimed).

    python generate_session.py PARENT_PID

argv: the pid of the agent's process, which this session dies with (`session.die_with_parent`);
stdin: a JSON object {model_dir, prompt_ids, decode_tokens, depths, depth_ids, reps, warmup,
threads (or null), outputs (a directory)}; stdout: a JSON object with the timings; the tokens
and first-step logits of the first generation at depth 0 go to `outputs/outputs.npz`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

NS_PER_MS = 1e6
FP32_BYTES = 4


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _load(og: Any, model_dir: str, threads: int | None) -> Any:
    config = og.Config(model_dir)
    if threads:
        # the decoder's session options (genai_config.json) as the farm's --threads says
        config.overlay(
            json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}})
        )
    return og.Model(config)


def _generator(og: Any, model: Any, max_length: int) -> Any:
    params = og.GeneratorParams(model)
    # greedy; min_length = max_length: no end-of-sequence token ends a generation early
    params.set_search_options(do_sample=False, max_length=max_length, min_length=max_length, batch_size=1)
    return og.Generator(model, params)


def _ids(np: Any, ids: list[int]) -> Any:
    return np.asarray(ids, dtype=np.int32)


def generate_once(
    og: Any,
    np: Any,
    model: Any,
    spec: dict[str, Any],
    depth: int,
    *,
    outputs: bool = False,
    read_kv: bool = False,
) -> dict[str, Any]:
    """One generation at `depth`: the timings and the tokens it generated; with `outputs` its
    first step's logits too, with `read_kv` the cache at its end (both read outside the timed calls)."""
    prompt = _ids(np, spec["prompt_ids"])
    decode = int(spec["decode_tokens"])
    generator = _generator(og, model, depth + len(prompt) + decode)
    depth_ns = 0
    if depth:
        start = time.perf_counter_ns()
        generator.append_tokens(_ids(np, spec["depth_ids"][:depth]))
        depth_ns = time.perf_counter_ns() - start
    start = time.perf_counter_ns()
    generator.append_tokens(prompt)
    prefill_ns = time.perf_counter_ns() - start
    logits = generator.get_output("logits") if outputs else None
    first_start = time.perf_counter_ns()
    generator.generate_next_token()
    first_end = time.perf_counter_ns()
    token_ns: list[int] = []
    last_end = first_end
    for _ in range(decode - 1):
        start = time.perf_counter_ns()
        generator.generate_next_token()
        last_end = time.perf_counter_ns()
        token_ns.append(last_end - start)
    sequence = list(generator.get_sequence(0))
    result = {
        "depth": depth,
        "depth_prefill_ms": depth_ns / NS_PER_MS,
        "prefill_ms": prefill_ns / NS_PER_MS,
        "first_token_ms": (first_end - first_start) / NS_PER_MS,
        "token_ms": [t / NS_PER_MS for t in token_ns],
        "decode_span_ms": (last_end - first_end) / NS_PER_MS,
        "tokens": [int(t) for t in sequence[-decode:]],
        "kv_cache": _kv_cache(generator, spec["model_dir"]) if read_kv else None,
    }
    if logits is not None:  # the prompt's last position
        result["logits"] = np.asarray(logits, dtype=np.float32).reshape(-1, np.asarray(logits).shape[-1])[-1]
    return result


def _kv_cache(generator: Any, model_dir: str) -> dict[str, Any]:
    """The cache at the end of the generation: every layer's K and V tensors as the runtime holds
    them (`measured`: their shapes and element size), or, where it does not let them be read, the
    model's shape times the context (`estimated`)."""
    config = json.loads((Path(model_dir) / "genai_config.json").read_text())["model"]
    decoder = config["decoder"]
    layers = int(decoder["num_hidden_layers"])
    outputs = decoder.get("outputs") or {}
    names = [
        outputs.get("present_key_names", "present.%d.key"),
        outputs.get("present_value_names", "present.%d.value"),
    ]
    try:
        tensors = [generator.get_output(name % layer) for layer in range(layers) for name in names]
    except Exception as exc:  # a runtime that keeps its cache to itself
        heads, size = int(decoder["num_key_value_heads"]), int(decoder["head_size"])
        context = len(generator.get_sequence(0))
        return {
            "bytes": 2 * layers * heads * size * context * FP32_BYTES,
            "context_tokens": context,
            "source": "estimated",
            "formula": f"2 (K, V) x {layers} layers x {heads} KV heads x {size} head size x {context} "
            f"tokens x {FP32_BYTES} bytes (fp32 assumed; the runtime did not return its cache: "
            f"{type(exc).__name__})",
            "layers": layers,
        }
    first = tensors[0]
    return {
        "bytes": int(sum(t.nbytes for t in tensors)),
        "context_tokens": int(first.shape[2]) if first.ndim == 4 else 0,
        "source": "measured",
        "shape": [int(d) for d in first.shape],
        "layers": layers,
        "dtype": str(first.dtype),
    }


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    import importlib

    import numpy as np

    og = importlib.import_module("onnxruntime_genai")  # untyped: used through Any

    rss_before = _status_kib("VmRSS")
    start = time.perf_counter_ns()
    model = _load(og, spec["model_dir"], spec.get("threads"))
    load_ns = time.perf_counter_ns() - start
    # the first generation is never timed: its tokens and logits are the outputs
    first = generate_once(og, np, model, spec, 0, outputs=True)
    for _ in range(int(spec["warmup"]) - 1):
        generate_once(og, np, model, spec, 0)
    reps = []
    deepest = max(int(d) for d in spec["depths"])
    kv_cache = None
    for depth in spec["depths"]:
        for rep in range(int(spec["reps"])):
            # the cache is read once, untimed, at the end of the longest context
            last = int(depth) == deepest and rep == int(spec["reps"]) - 1 and kv_cache is None
            generated = generate_once(og, np, model, spec, int(depth), read_kv=last)
            kv_cache = kv_cache or generated["kv_cache"]
            reps.append({k: v for k, v in generated.items() if k not in ("tokens", "logits", "kv_cache")})
    peak = _status_kib("VmHWM")  # before a second model is loaded: the peak of one session
    del model
    # the folder loaded again in the same process: files cached, allocator and runtime warm
    start = time.perf_counter_ns()
    warm = _load(og, spec["model_dir"], spec.get("threads"))
    warm_load_ns = time.perf_counter_ns() - start
    del warm
    np.savez(Path(spec["outputs"]) / "outputs.npz", tokens=np.asarray(first["tokens"], dtype=np.int32),
             first_step_logits=first["logits"])  # fmt: skip
    return {
        "load_ms": load_ns / NS_PER_MS,
        "warm_load_ms": warm_load_ns / NS_PER_MS,
        "first_ttft_ms": first["prefill_ms"] + first["first_token_ms"],
        "reps": reps,
        "kv_cache": kv_cache,
        "rss_before_bytes": None if rss_before is None else rss_before * 1024,
        "rss_peak_bytes": None if peak is None else peak * 1024,
        "runtime": f"onnxruntime-genai {og.__version__}",
        "pid": os.getpid(),
    }


def main() -> int:
    from ondevice_farm_agents.host.session import serve_one

    return serve_one(measure)


if __name__ == "__main__":
    sys.exit(main())
