"""The farm's device runner for a session runtime's program (`ondevice_farm_agents.runtimes`):
pushed to the unit with the runtime's own session module (numpy and the runtime only) and run by
the unit's python3 (Linux boards; any unit whose python3 has the runtime's package).

It is `farm_runner.py`'s counterpart, not an extension of it: that one drives ONNX Runtime's
sessions and profiler; this one drives the session the session module's `open_session` makes, so a
sample is the span the host times (NumPy in, NumPy out) by one definition. It names no runtime: the
host tells it the session module and what to import. The phases are `host/edge_run.py`'s: the
runtime imported before any clock starts (`--import`, the registry's list), the load timed, one
first inference timed on its own, `--warmup` untimed runs, `--runs` timed runs
(`time.perf_counter_ns`), then a second load in the same process (warm load). With
`--profile-runs N` (given only for a runtime that profiles per op) a third session loads with
profiling on, runs N times and writes its dump to `profile.etdp`, which the host reads with the
runtime's profiler. It writes `result.json` and `outputs.npz` (the first inference's outputs,
`output_0`, `output_1`, ... in the model's order) into --out, in farm_runner.py's format.

    python3 edge_runner.py --session-module edge_runtimes.py --backend xnnpack --model m.pte \
        --inputs inputs.npz --input x --out DIR --warmup 5 --runs 50 [--threads N] \
        [--import torch ...] [--feature-input NAME ...] [--feature-output NAME ...] [--profile-runs N]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

NS_PER_MS = 1_000_000
#: the exit status when the unit's python3 lacks the runtime: the host turns it into an install hint
MISSING_RUNTIME_EXIT = 3
#: the profiled session's dump (its `write_etdump`), pulled back for the runtime's profiler
ETDUMP_NAME = "profile.etdp"


def _session_module(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("edge_runtimes", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"edge_runner: cannot load the session module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(args: argparse.Namespace) -> dict[str, Any]:
    try:
        import numpy as np

        # the runtime's import is no model's load: done before the clock starts, as on the host
        for name in args.imports:
            importlib.import_module(name)
    except ImportError as exc:
        missing = exc.name or str(exc)
        print(f"edge_runner: {sys.executable} has no module {missing!r}", file=sys.stderr)
        raise SystemExit(MISSING_RUNTIME_EXIT) from None
    session_module = _session_module(args.session_module)
    with np.load(args.inputs, allow_pickle=False) as data:
        inputs = [data[name] for name in args.input]
    names = (args.feature_input, args.feature_output) if args.feature_input else None

    def load(etdump: bool = False) -> Any:
        return session_module.open_session(
            args.backend, Path(args.model), inputs, args.threads or None, etdump, names
        )

    start = time.perf_counter_ns()
    session = load()
    load_ns = time.perf_counter_ns() - start
    start = time.perf_counter_ns()
    first = session.infer()
    first_ns = time.perf_counter_ns() - start
    for _ in range(args.warmup):
        session.infer()
    samples = []
    for _ in range(args.runs):
        start = time.perf_counter_ns()
        session.infer()
        samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
    runner = session.runner
    del session
    # a second session in the same process: what a warm start (page cache, allocator) costs
    start = time.perf_counter_ns()
    warm = load()
    warm_load_ns = time.perf_counter_ns() - start
    del warm
    outputs = {f"output_{i}": array for i, array in enumerate(first)}
    np.savez(os.path.join(args.out, "outputs.npz"), **outputs)

    if args.profile_runs:
        profiled = load(etdump=True)
        for _ in range(args.profile_runs):
            profiled.infer()
        profiled.write_etdump(Path(args.out) / ETDUMP_NAME)

    return {
        "load_ms": load_ns / NS_PER_MS,
        "warm_load_ms": warm_load_ns / NS_PER_MS,
        "first_inference_ms": first_ns / NS_PER_MS,
        "samples_ms": samples,
        "outputs": list(outputs),
        # ru_maxrss is in KiB on Linux (and Android)
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "runtime": runner,
        "threads": args.threads or len(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edge_runner")
    parser.add_argument("--session-module", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--input", action="append", required=True, help="input names, in the model's order")
    parser.add_argument("--feature-input", action="append", default=[])
    parser.add_argument("--feature-output", action="append", default=[])
    parser.add_argument("--import", dest="imports", action="append", default=[])
    parser.add_argument("--out", required=True)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--profile-runs", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(args)
    with open(os.path.join(args.out, "result.json"), "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
