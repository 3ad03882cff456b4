"""The farm's own device runner: pushed next to the model and run by the device's python3.

It needs only numpy and onnxruntime on the device (Linux boards, Termux), never the farm,
and measures the way the host agent does: session load, first inference, warm-up, timed
runs with `time.perf_counter_ns`, a second session's load (warm), then a profiled pass in a
separate session. It writes `result.json`, `outputs.npz` (first inference's outputs) and
`profile.json` into --out.

    python3 farm_runner.py --model m.onnx --inputs inputs.npz --out DIR \
        --provider CPUExecutionProvider --warmup 5 --runs 50 [--profile] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from typing import Any

NS_PER_MS = 1_000_000
PROFILED_RUNS = 3


def _options(ort: Any, threads: int, profile_prefix: str | None) -> Any:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import onnxruntime as ort

    with np.load(args.inputs, allow_pickle=False) as data:
        feeds = {name: data[name] for name in data.files}
    providers = list(args.provider)
    missing = [p for p in providers if p not in ort.get_available_providers()]
    if missing:
        raise SystemExit(f"farm_runner: this onnxruntime lacks {', '.join(missing)}")

    start = time.perf_counter_ns()
    session = ort.InferenceSession(args.model, _options(ort, args.threads, None), providers=providers)
    load_ns = time.perf_counter_ns() - start
    names = [o.name for o in session.get_outputs()]
    start = time.perf_counter_ns()
    first = session.run(names, feeds)
    first_ns = time.perf_counter_ns() - start
    for _ in range(args.warmup):
        session.run(names, feeds)
    samples = []
    for _ in range(args.runs):
        start = time.perf_counter_ns()
        session.run(names, feeds)
        samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
    del session
    # a second session in the same process: what a warm start (page cache, allocator) costs
    start = time.perf_counter_ns()
    warm = ort.InferenceSession(args.model, _options(ort, args.threads, None), providers=providers)
    warm_load_ns = time.perf_counter_ns() - start
    del warm
    np.savez(os.path.join(args.out, "outputs.npz"), **dict(zip(names, first, strict=True)))

    if args.profile:
        prefix = os.path.join(args.out, "profile")
        profiled = ort.InferenceSession(args.model, _options(ort, args.threads, prefix), providers=providers)
        # one cold run more: the host leaves the first profiled run out of per-op means
        for _ in range(max(1, min(args.runs, PROFILED_RUNS)) + 1):
            profiled.run(names, feeds)
        shutil.move(profiled.end_profiling(), os.path.join(args.out, "profile.json"))

    return {
        "load_ms": load_ns / NS_PER_MS,
        "warm_load_ms": warm_load_ns / NS_PER_MS,
        "first_inference_ms": first_ns / NS_PER_MS,
        "samples_ms": samples,
        "outputs": names,
        # ru_maxrss is in KiB on Linux (and Android)
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "runtime": f"onnxruntime-python {ort.__version__}",
        "providers": providers,
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="farm_runner")
    parser.add_argument("--model", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--provider", action="append", required=True)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args)
    with open(os.path.join(args.out, "result.json"), "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
