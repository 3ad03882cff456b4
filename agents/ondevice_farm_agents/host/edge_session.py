"""One measurement session of a session runtime's host job in a process of its own.

The counterpart of `session.py` (ONNX Runtime) for the repeats after a job's first session, with
the same definition: load, one untimed first inference, `warmup` untimed runs, `runs` timed runs.
Run as `python -m ondevice_farm_agents.host.edge_session PARENT_PID`: it dies with the process
that starts it, however that dies (`session.die_with_parent`). It knows no runtime: the job names
the runtime's session module and what to import first, as `android/edge_runner.py` is told them.

stdin: a JSON object {session_module (the runtime's session module's path), imports (modules
imported before the clock starts, in order), backend, model, inputs (an .npz path), order (input
names in the model's order), warmup, runs, threads, and optionally features ({inputs, outputs}: the
artifact's own names, in order) and affinity (CPU numbers the process is pinned to before the
runtime starts a thread)};
stdout: a JSON object {samples_ms: [...], load_ms}.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any

NS_PER_MS = 1e6


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("affinity"):
        # before the runtime's import: every thread it starts inherits the mask
        os.sched_setaffinity(0, [int(c) for c in spec["affinity"]])
    import numpy as np

    from ondevice_farm_agents.runtimes.spec import load_session_module

    with np.load(spec["inputs"]) as npz:
        inputs = [npz[name] for name in spec["order"]]
    threads = int(spec["threads"]) if spec.get("threads") else None
    # the runtime's import is no model's load: done before the clock starts, as in the job's session
    for module in spec["imports"]:
        importlib.import_module(module)
    session_module = load_session_module(Path(spec["session_module"]))
    start = time.perf_counter_ns()
    names = (spec["features"]["inputs"], spec["features"]["outputs"]) if spec.get("features") else None
    session = session_module.open_session(spec["backend"], Path(spec["model"]), inputs, threads, False, names)
    load_ns = time.perf_counter_ns() - start
    session.infer()  # the first inference: a session's one-off costs, never timed
    for _ in range(int(spec["warmup"])):
        session.infer()
    samples: list[float] = []
    for _ in range(int(spec["runs"])):
        start = time.perf_counter_ns()
        session.infer()
        samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
    return {"samples_ms": samples, "load_ms": load_ns / NS_PER_MS}


def main() -> int:
    from ondevice_farm_agents.host.session import serve_one

    return serve_one(measure)


if __name__ == "__main__":
    sys.exit(main())
