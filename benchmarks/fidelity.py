"""Does the farm measure what a bare ONNX Runtime loop measures, and what does a job cost?

For each model, in one process run, alternating rounds of:
  bare: InferenceSession(ORT_ENABLE_ALL, same threads) -> warm-up -> N timed `run` calls
  farm: `ondevice_farm.controller.pipeline.submit` on host-cpu (embedded Ray, DeviceActor, store)
  native: the farm's C++ runner (agents/android/native, x86-64 build against the same wheel's
          libonnxruntime) as a process on this host, the same threads, warm-up and runs
and prints the ratio of the farm's p50 to the bare loop's p50 (goal 1.00 +/- 0.03), and the
farm's overhead per job: wall time of the submission minus the time the job spent on the device.
For the native runner: its p50 over the bare loop's, and its start-up cost: the process's wall
time minus what it measured itself (load, first inference, warm-up, timed runs), i.e. exec,
loading libonnxruntime, reading inputs and writing outputs.

    python benchmarks/fidelity.py [MODEL.onnx ...]   (default: examples/tinynet.onnx and,
                                                      where present, ../shared/models/mobilenet_v2.onnx)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RUNS = 200
WARMUP = 20
ROUNDS = 3
THREADS = 1


def bare_p50(model: Path, inputs: dict[str, np.ndarray]) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = THREADS
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for _ in range(WARMUP + 1):
        session.run(names, inputs)
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter_ns()
        session.run(names, inputs)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return float(np.percentile(samples, 50))


def native_p50_and_startup(
    binary: Path, model: Path, inputs: dict[str, np.ndarray], tmp: Path
) -> tuple[float, float]:
    """(p50 ms of the native runner's samples, its start-up seconds), one process run."""
    args = [str(binary), "--model", str(model), "--out", str(tmp)]
    for index, (name, array) in enumerate(inputs.items()):
        np.save(tmp / f"input_{index}.npy", array)
        args += ["--input", f"{name}={tmp / f'input_{index}.npy'}"]
    args += ["--threads", str(THREADS), "--warmup", str(WARMUP), "--runs", str(RUNS)]
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    wall = time.perf_counter() - start
    result = json.loads((tmp / "result.json").read_text())
    p50 = float(np.percentile(result["samples_ms"], 50))
    phases = ("load_ms", "first_inference_ms", "warmup_total_ms")
    measured_ms = sum(result[k] for k in phases) + sum(result["samples_ms"])
    return p50, wall - measured_ms / 1e3


def main(models: list[Path]) -> None:
    import ray

    from ondevice_farm.config import FarmHome
    from ondevice_farm.controller.cluster import ClusterConfig
    from ondevice_farm.controller.pipeline import submit
    from ondevice_farm.controller.submission import SubmitRequest, prepare
    from ondevice_farm.profiles import load_profiles
    from ondevice_farm_agents.android.native_build import build
    from ondevice_farm_agents.base import AgentSettings

    profiles = load_profiles()
    native = build("linux-x86_64").binary
    native_rows = []
    ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    print(f"{'model':<16} {'bare p50 ms':>12} {'farm p50 ms':>12} {'ratio':>7} {'overhead/job s':>15}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = FarmHome(Path(tmp))
            for model in models:
                request = SubmitRequest(
                    model_path=model, devices="host-cpu", runs=RUNS, warmup=WARMUP, intra_op_threads=THREADS
                )
                inputs = prepare(request, profiles).inputs
                ratios, overheads, bares, farms = [], [], [], []
                natives, native_ratios, startups = [], [], []
                for round_index in range(ROUNDS):
                    bare = bare_p50(model, inputs)
                    out = Path(tmp) / f"native-{model.stem}-{round_index}"
                    out.mkdir()
                    native_p50, startup = native_p50_and_startup(native, model, inputs, out)
                    natives.append(native_p50)
                    native_ratios.append(native_p50 / bare)
                    startups.append(startup)
                    start = time.perf_counter()
                    document = submit(
                        request,
                        home=home,
                        profiles=profiles,
                        settings=AgentSettings(profiles=profiles),
                        cluster=ClusterConfig(),
                    )
                    wall = time.perf_counter() - start
                    job = document["jobs"][0]
                    farms.append(job["latency_ms"]["p50"])
                    bares.append(bare)
                    ratios.append(job["latency_ms"]["p50"] / bare)
                    overheads.append(wall - job["duration_s"])
                print(
                    f"{model.stem:<16} {statistics.median(bares):>12.3f} {statistics.median(farms):>12.3f} "
                    f"{statistics.median(ratios):>7.3f} {statistics.median(overheads):>15.2f}"
                )
                native_rows.append(
                    f"{model.stem:<16} {statistics.median(bares):>12.3f} {statistics.median(natives):>13.3f} "
                    f"{statistics.median(native_ratios):>7.3f} {statistics.median(startups):>12.3f}"
                )
    finally:
        ray.shutdown()
    print(f"\n{'model':<16} {'bare p50 ms':>12} {'native p50 ms':>13} {'ratio':>7} {'start-up s':>12}")
    print("\n".join(native_rows))


if __name__ == "__main__":
    given = [Path(a) for a in sys.argv[1:]]
    if not given:
        given = [REPO / "examples" / "tinynet.onnx"]
        shared = REPO.parent / "shared" / "models" / "mobilenet_v2.onnx"
        if shared.exists():
            given.append(shared)
    main(given)
