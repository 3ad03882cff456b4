"""One measurement session of a host job in a process of its own: load, warm-up, timed runs.

The host agent starts this file with the interpreter that runs it (`python session.py`), one
process per repeat after the first, so each repeat draws its own thread placement, allocator
state and CPU frequency history; in one long-lived process those are fixed for every repeat and
the between-session spread would be hidden. It imports only numpy and onnxruntime (no farm), so
a repeat costs the interpreter start and the session, nothing more.

    python session.py PARENT_PID

argv: the pid of the process that starts it (the host agent: a `DeviceActor`'s worker); the
session dies with that process, however it dies (`die_with_parent`).
stdin: a JSON object {model, providers, inputs (an .npz path), warmup, runs, threads, and
optionally affinity (CPU numbers the process is pinned to before ONNX Runtime starts a thread)
and spinning (bool: ONNX Runtime's session.intra_op.allow_spinning)};
stdout: a JSON object {samples_ms: [...], load_ms}.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

NS_PER_MS = 1e6
#: prctl(2)'s option: the signal this process gets when the thread that started it ends
PR_SET_PDEATHSIG = 1
#: off Linux (no prctl), how often a watcher thread asks whether the parent is still there
PARENT_POLL_S = 1.0
#: the exit status of a session whose parent was gone before it could start measuring
ORPHANED_EXIT = 3


def die_with_parent(parent_pid: int) -> None:
    """A parent killed with kill -9 (an OOM kill, `ray stop --force`, a killed actor) runs no code
    that could end this process, which would then run its timed runs to their end on a host whose
    next job it disturbs. On Linux the kernel SIGKILLs it when the parent's starting thread ends
    (PR_SET_PDEATHSIG; the agent waits for it on that same thread); elsewhere a thread polls the
    parent. A parent already gone before the signal was set: exit at once."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(PARENT_POLL_S)
            os._exit(ORPHANED_EXIT)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:
        os._exit(ORPHANED_EXIT)


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("affinity"):
        # before onnxruntime's import: every thread it starts inherits the mask
        os.sched_setaffinity(0, [int(c) for c in spec["affinity"]])
    import numpy as np
    import onnxruntime as ort

    with np.load(spec["inputs"]) as npz:
        inputs = {name: npz[name] for name in npz.files}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if spec.get("threads"):
        options.intra_op_num_threads = int(spec["threads"])
    elif spec.get("affinity"):
        # ORT's default pool pins each worker to a core of its own choosing, outside the mask
        options.intra_op_num_threads = len(spec["affinity"])
    if spec.get("spinning") is not None:
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spec["spinning"] else "0")
    start = time.perf_counter_ns()
    session = ort.InferenceSession(spec["model"], options, providers=spec["providers"])
    load_ns = time.perf_counter_ns() - start
    names = [o.name for o in session.get_outputs()]
    session.run(names, inputs)  # the first inference: a session's one-off costs, never timed
    for _ in range(int(spec["warmup"])):
        session.run(names, inputs)
    samples: list[float] = []
    for _ in range(int(spec["runs"])):
        start = time.perf_counter_ns()
        session.run(names, inputs)
        samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
    return {"samples_ms": samples, "load_ms": load_ns / NS_PER_MS}


def serve_one(measure: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """A session process's life: die with the agent (its pid in argv[1]), read the job's JSON on
    stdin, write `measure`'s result on stdout, or one line of its error on stderr and exit 1.
    The host's other session kinds (a session runtime's repeats, generation) run the same way."""
    if len(sys.argv) > 1:
        die_with_parent(int(sys.argv[1]))
    try:
        result = measure(json.loads(sys.stdin.read()))
    except Exception as exc:  # the parent turns one line of it into a DeviceError
        sys.stderr.write(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}\n")
        return 1
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


def main() -> int:
    return serve_one(measure)


if __name__ == "__main__":
    sys.exit(main())
