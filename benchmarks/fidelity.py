"""Does the farm measure what a bare ONNX Runtime loop measures, and what does a job cost?

For each model and thread setting (ONNX Runtime's default intra-op threads, and 1), rounds of:
  bare: a fresh Python process with numpy and onnxruntime only: InferenceSession(ORT_ENABLE_ALL,
        same threads) -> first inference -> warm-up -> N timed `run` calls
  farm: `ondevice_farm.controller.pipeline.submit` on host-cpu, inside the embedded Ray a
        `farm submit` starts (`ray_cluster(ClusterConfig())`: its fleet, node agent, DeviceActor
        and store, each submission a fresh fleet and actor process)
in an order that alternates round by round, so load that the machine's other work adds cancels in
the ratio. Prints the median over rounds of the ratio of the farm's p50 to the bare loop's p50
(goal 1.00 +/- 0.03), every round's ratio, the farm's overhead per job (wall time of the
submission minus the time the job spent on the device) and the 1-minute load average (`uptime`)
at the row's start and end.
With --native, the farm's C++ runner (agents/ondevice_farm_agents/android/native, x86-64 build against the
same wheel's libonnxruntime) too: its p50 over the bare loop's, and its start-up cost.

    python benchmarks/fidelity.py [--threads default,1] [--rounds N] [--runs N] [--native] [MODEL.onnx ...]

Default models: examples/tinynet.onnx, and a resnet18 and a small BERT-style encoder that this
script builds with torch (seeded weights) into benchmarks/results/fidelity-models/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / "benchmarks" / "results" / "fidelity-models"
RUNS = 200
WARMUP = 20
ROUNDS = 5
SEED = 20261201


# -- the bare loop: a process of its own, onnxruntime and numpy only ---------------------------


def bare_loop(spec: dict[str, Any]) -> float:
    """p50 ms of `runs` timed `InferenceSession.run` calls (run in a fresh process)."""
    import onnxruntime as ort

    with np.load(spec["inputs"]) as npz:
        inputs = {name: npz[name] for name in npz.files}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if spec["threads"]:
        options.intra_op_num_threads = spec["threads"]
    session = ort.InferenceSession(spec["model"], options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for _ in range(spec["warmup"] + 1):
        session.run(names, inputs)
    samples = []
    for _ in range(spec["runs"]):
        start = time.perf_counter_ns()
        session.run(names, inputs)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return float(np.percentile(samples, 50))


def bare_p50(model: Path, inputs_npz: Path, threads: int | None, runs: int) -> float:
    spec = {
        "model": str(model),
        "inputs": str(inputs_npz),
        "threads": threads,
        "warmup": WARMUP,
        "runs": runs,
    }
    done = subprocess.run(
        [sys.executable, __file__, "--bare"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


# -- models ------------------------------------------------------------------------------------


def build_models(out_dir: Path) -> list[Path]:
    """resnet18 (torchvision's architecture, 1x3x224x224) and a 4-layer BERT-style encoder
    (d=256, 4 heads, 128 tokens of int64 ids), exported with seeded random weights."""
    import torch
    from torch import nn

    out_dir.mkdir(parents=True, exist_ok=True)
    resnet, encoder = out_dir / "resnet18.onnx", out_dir / "bert_encoder.onnx"
    torch.manual_seed(SEED)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(y)) + self.down(x))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
            widths, layers, cin = (64, 128, 256, 512), [], 64
            for i, w in enumerate(widths):
                layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
                cin = w
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pooled = nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1)
            out: torch.Tensor = self.fc(torch.flatten(pooled, 1))
            return out

    class Encoder(nn.Module):
        def __init__(self, vocab: int = 8000, d: int = 256, tokens: int = 128) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.norm(self.encoder(self.tok(ids) + self.pos))
            return out

    if not resnet.exists():
        torch.onnx.export(
            ResNet18().eval(), (torch.randn(1, 3, 224, 224),), str(resnet), input_names=["x"], dynamo=False
        )
    if not encoder.exists():
        torch.onnx.export(
            Encoder().eval(),
            (torch.randint(0, 8000, (1, 128)),),
            str(encoder),
            input_names=["ids"],
            dynamo=False,
        )
    return [resnet, encoder]


# -- the native runner (optional) --------------------------------------------------------------


def native_p50_and_startup(
    binary: Path, model: Path, inputs: dict[str, np.ndarray], tmp: Path, threads: int | None, runs: int
) -> tuple[float, float]:
    """(p50 ms of the native runner's samples, its start-up seconds), one process run."""
    args = [str(binary), "--model", str(model), "--out", str(tmp)]
    for index, (name, array) in enumerate(inputs.items()):
        np.save(tmp / f"input_{index}.npy", array)
        args += ["--input", f"{name}={tmp / f'input_{index}.npy'}"]
    if threads:
        args += ["--threads", str(threads)]
    args += ["--warmup", str(WARMUP), "--runs", str(runs)]
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    wall = time.perf_counter() - start
    result = json.loads((tmp / "result.json").read_text())
    p50 = float(np.percentile(result["samples_ms"], 50))
    phases = ("load_ms", "first_inference_ms", "warmup_total_ms")
    measured_ms = sum(result[k] for k in phases) + sum(result["samples_ms"])
    return p50, wall - measured_ms / 1e3


# -- the benchmark -----------------------------------------------------------------------------


def main(models: list[Path], threads_list: list[int | None], rounds: int, runs: int, native: bool) -> None:
    from ondevice_farm.config import FarmHome
    from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
    from ondevice_farm.controller.pipeline import submit
    from ondevice_farm.controller.submission import prepare
    from ondevice_farm.controller.submit_request import SubmitRequest
    from ondevice_farm.profiles import load_profiles
    from ondevice_farm_agents.base import AgentSettings

    profiles = load_profiles()
    binary = None
    if native:
        from ondevice_farm_agents.android.native_build import build

        binary = build("linux-x86_64").binary
    native_rows = []
    print(
        f"{'model':<14} {'threads':>7} {'bare p50 ms':>12} {'farm p50 ms':>12} {'ratio':>6}  "
        f"{'rounds':<34} {'overhead/job s':>14} {'load':>10}"
    )
    # the embedded Ray a `farm submit` starts, kept for every submission (each makes its own
    # fleet and DeviceActor in it), so the figures are the farm's own, not a differently set-up Ray
    with ray_cluster(ClusterConfig()), tempfile.TemporaryDirectory() as tmp:
        home = FarmHome(Path(tmp))
        for model in models:
            for threads in threads_list:
                request = SubmitRequest(
                    model_path=model, devices="host-cpu", runs=runs, warmup=WARMUP, intra_op_threads=threads
                )
                inputs = prepare(request, profiles).inputs
                npz = Path(tmp) / f"{model.stem}-inputs.npz"
                arrays: dict[str, Any] = dict(inputs)
                np.savez(npz, **arrays)
                load_start = os.getloadavg()[0]
                ratios, overheads, bares, farms = [], [], [], []
                natives, native_ratios, startups = [], [], []
                for round_index in range(rounds):
                    farm_first = round_index % 2 == 1
                    if not farm_first:
                        bare = bare_p50(model, npz, threads, runs)
                    start = time.perf_counter()
                    document = submit(
                        request, home=home, profiles=profiles, settings=AgentSettings(profiles=profiles),
                        cluster=ClusterConfig(),
                    )  # fmt: skip
                    wall = time.perf_counter() - start
                    if farm_first:
                        bare = bare_p50(model, npz, threads, runs)
                    job = document["jobs"][0]
                    if "latency_ms" not in job:
                        raise SystemExit(f"the farm's job on {model.name} failed: {job.get('error', job)}")
                    farms.append(job["latency_ms"]["p50"])
                    bares.append(bare)
                    ratios.append(job["latency_ms"]["p50"] / bare)
                    overheads.append(wall - job["duration_s"])
                    if binary is not None:
                        out = Path(tmp) / f"native-{model.stem}-{threads}-{round_index}"
                        out.mkdir()
                        native_p50, startup = native_p50_and_startup(
                            binary, model, inputs, out, threads, runs
                        )
                        natives.append(native_p50)
                        native_ratios.append(native_p50 / bare)
                        startups.append(startup)
                shown = ",".join(f"{r:.2f}" for r in ratios)
                print(
                    f"{model.stem:<14} {threads or 'default':>7} {statistics.median(bares):>12.3f} "
                    f"{statistics.median(farms):>12.3f} {statistics.median(ratios):>6.3f}  {shown:<34} "
                    f"{statistics.median(overheads):>14.2f} {load_start:>4.2f}-{os.getloadavg()[0]:.2f}",
                    flush=True,
                )
                if natives:
                    native_rows.append(
                        f"{model.stem:<14} {threads or 'default':>7} {statistics.median(bares):>12.3f} "
                        f"{statistics.median(natives):>13.3f} {statistics.median(native_ratios):>7.3f} "
                        f"{statistics.median(startups):>12.3f}"
                    )
    if native_rows:
        print(
            f"\n{'model':<14} {'threads':>7} {'bare p50 ms':>12} {'native p50 ms':>13} "
            f"{'ratio':>7} {'start-up s':>12}"
        )
        print("\n".join(native_rows))


if __name__ == "__main__":
    if sys.argv[1:] == ["--bare"]:
        print(bare_loop(json.loads(sys.stdin.read())))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--threads", default="default,1", help="comma-separated: default or a number")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--native", action="store_true", help="the C++ runner too (builds it)")
    args = parser.parse_args()
    given = args.models or [REPO / "examples" / "tinynet.onnx", *build_models(MODELS_DIR)]
    thread_settings = [None if t == "default" else int(t) for t in args.threads.split(",")]
    main(given, thread_settings, args.rounds, args.runs, args.native)
