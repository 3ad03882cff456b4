#!/usr/bin/env python3
"""A stand-in for `onnxruntime_perf_test` inside the ADB peer's sandbox (no phone, and no
perf_test build for this host: ONNX Runtime's releases do not ship the tool).

It does what perf_test does, for real, with this host's onnxruntime: reads the inputs from
`test_data_set_0/input_<i>.pb` beside the model, creates one session (timed), makes one untimed
warm-up run (timed as the first inference), then `-r N` timed runs, and prints its figures in the
lines of a recorded real perf_test output (tests/android/fixtures/perf_test/
android_vivo_x300_sme2_resnet50v2.txt: ORT 1.2x with `-s`). Every figure it prints is measured
here; none is copied from the recording. `tests/android/test_perf_test_over_adb.py` checks that
its lines have the recording's shape.

Flags taken as perf_test takes them: -e (only `cpu`: what this host's onnxruntime has), -m times,
-r, -s, -x, -i (ignored for the CPU EP, as perf_test does), -p (profile prefix: ONNX Runtime's own
profiler, so the file is `<prefix>_<date>.json` as on a device), -C (session config entries).
"""

from __future__ import annotations

import getopt
import os
import resource
import sys
import time
from pathlib import Path


def _usage(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    try:
        flags, rest = getopt.getopt(argv, "e:m:r:sx:i:p:C:Z")
    except getopt.GetoptError as exc:
        return _usage(f"perf_test: {exc}")
    options = dict(flags)
    if len(rest) != 1:
        return _usage("perf_test: one model path expected")
    provider = options.get("-e", "cpu")
    if provider != "cpu":
        # what a build without that EP says before it exits
        print(f"{provider} is not supported in this build. ", file=sys.stderr)
        return 1
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper

    model = Path(rest[0])
    feeds = {}
    for path in sorted((model.parent / "test_data_set_0").glob("input_*.pb")):
        tensor = TensorProto()
        tensor.ParseFromString(path.read_bytes())
        feeds[tensor.name] = numpy_helper.to_array(tensor)
    session_options = ort.SessionOptions()
    if "-x" in options:
        session_options.intra_op_num_threads = int(options["-x"])
        print(f"Setting intra_op_num_threads to {options['-x']}")
    if "-Z" in options:
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        print("Disabling intra-op thread spinning between runs")
    for entry in options.get("-C", "").split():
        key, _, value = entry.partition("|")
        session_options.add_session_config_entry(key, value)
    if "-p" in options:
        session_options.enable_profiling = True
        session_options.profile_file_prefix = options["-p"]
    cpu_start = os.times()
    start = time.perf_counter()
    session = ort.InferenceSession(str(model), session_options, providers=["CPUExecutionProvider"])
    print(f"Session creation time cost: {time.perf_counter() - start:g} s")
    start = time.perf_counter()
    session.run(None, feeds)
    print(f"First inference time cost: {(time.perf_counter() - start) * 1000:.0f} ms")
    costs = []
    runs_start = time.perf_counter()
    for _ in range(max(1, int(options.get("-r", "1000")))):
        start = time.perf_counter()
        session.run(None, feeds)
        costs.append(time.perf_counter() - start)
    run_time = time.perf_counter() - runs_start
    if "-p" in options:
        session.end_profiling()
    cpu_end = os.times()
    cpu_s = (cpu_end.user - cpu_start.user) + (cpu_end.system - cpu_start.system)
    cpu_percent = int(100 * cpu_s / max(cpu_end.elapsed - cpu_start.elapsed, 1e-9) / (os.cpu_count() or 1))
    # ru_maxrss is in KiB on Linux; perf_test prints bytes
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    total = float(np.sum(costs))
    print(f"Total inference time cost: {total:g} s")
    print(f"Total inference requests: {len(costs)}")
    print(f"Average inference time cost total: {total / len(costs) * 1000:f} ms")
    print(f"Total inference run time: {run_time:g} s")
    print(f"Number of inferences per second: {len(costs) / run_time:.3f}")
    print(f"Avg CPU usage: {cpu_percent} %")
    print(f"Peak working set size: {peak} bytes")
    if "-s" in options:
        ordered = sorted(costs)
        last = len(ordered) - 1
        print(f"Avg CPU usage:{cpu_percent}")
        print(f"Peak working set size:{peak}")
        print(f"Runs:{len(costs)}")
        print(f"Min Latency: {ordered[0]:g} s")
        print(f"Max Latency: {ordered[last]:g} s")
        for label, q in (("P50", 0.5), ("P90", 0.9), ("P95", 0.95), ("P99", 0.99), ("P999", 0.999)):
            print(f"{label} Latency: {ordered[int(last * q)]:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
