"""What the fleet costs around a job: warm submit, cold submit, per job in a big nightly.

    unshare -n sh -c 'ip link set lo up && PYTHONPATH=$PWD .venv/bin/python benchmarks/fleet_overheads.py'

All measured here, wall clock, with the real CLI as a user runs it, a tiny model (Relu, Sigmoid on
1x64: its own inference takes microseconds), one timed run, no warm-up, no profiled pass:

- warm: `farm submit --address` to a `farm serve` already running on this host (its embedded
  Ray, bound to 127.0.0.1, token auth as Ray sets it up; the submitter exports no RAY_* variable).
- cold: `farm submit` with no address: starts and stops an embedded Ray.
- nightly: `farm nightly` (embedded) of 50 models x 4 simulated units = 200 jobs against the same
  suite with 1 model (4 jobs): per-job overhead = (T200 - T4) / 196, everything a job costs
  (compile, reference, scheduling, storing) amortised over 4 units.

Prints each figure beside its goal from issue #21 and the ratio figure/goal. With `--baseline
DIR` (a checkout of another farm version, e.g. `git worktree add /tmp/before COMMIT`), every
figure is measured for it too, in the same run, block by block (baseline first), and printed
before | after side by side. The load average is printed at the start and the end: on a shared
machine it moves every figure. HOME and FARM_HOME are temp dirs: the Ray token this creates is
not the user's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper

FARM = [sys.executable, "-m", "ondevice_farm"]
GOALS_S = {"warm submit": 0.5, "cold submit": 3.0, "per-job (200-job nightly)": 0.05}


def tiny_model(path: Path, width: int = 64) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Sigmoid", ["h"], ["y"])],
        path.stem,
        [x],
        [y],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def timed(args: list[str], env: dict[str, str], timeout_s: float = 600) -> float:
    began = time.perf_counter()
    # in the tree's own root: `python -m` puts the working directory first on sys.path
    done = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=timeout_s, cwd=env.get("PYTHONPATH")
    )
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def write_suite(path: Path, models: list[Path], units: int) -> Path:
    lines = ["name: overheads", f"devices: [{', '.join(f'simulated:sim-{i}' for i in range(units))}]"]
    lines += ["runs: 1", "warmup: 0", "models:"] + [f"  - path: {m}" for m in models]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    serve = subprocess.Popen(
        [*FARM, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True, cwd=env.get("PYTHONPATH"),
    )  # fmt: skip
    assert serve.stderr is not None
    deadline = time.monotonic() + 120
    for line in serve.stderr:
        found = re.search(r"embedded Ray at (\S+?);", line)
        if found:
            return serve, found.group(1)
        if time.monotonic() > deadline:
            break
    serve.kill()
    raise RuntimeError("farm serve did not start")


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def measure(
    tree: str, root: Path, model: Path, repeats: int, skip_nightly: bool, export_token: bool
) -> dict[str, float]:
    """Every figure for the farm in `tree` (its checkout root, first on PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "FARM_"))}
    env.update(HOME=str(root / "user"), RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=tree)
    submit = ["submit", str(model), "--devices", "host-cpu", "--runs", "1", "--warmup", "0", "--no-profile"]
    figures: dict[str, float] = {}
    serve, address = start_serve({**env, "FARM_HOME": str(root / "head")})
    try:
        submitter = {**env, "FARM_HOME": str(root / "runner")}
        if export_token:
            submitter.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(root / "user/.ray/auth_token"))
        timed([*FARM, *submit, "--address", address], submitter)  # first: the farm's caches filled
        warm = [timed([*FARM, *submit, "--address", address], submitter) for _ in range(repeats)]
    finally:
        stop(serve)
    figures["warm submit"] = statistics.median(warm)
    cold_env = {**env, "FARM_HOME": str(root / "cold")}
    timed([*FARM, *submit], cold_env)  # the same: a user's second submit of a model
    figures["cold submit"] = statistics.median([timed([*FARM, *submit], cold_env) for _ in range(repeats)])
    if not skip_nightly:
        models = [tiny_model(root / f"m{i:02d}.onnx", 16 + i) for i in range(50)]
        sim = {**env, "FARM_SIMULATED_DEVICES": "4", "FARM_AGENT_SIMULATED_LATENCY_MS": "0.1",
               "FARM_AGENT_SIMULATED_PREFIX": "sim"}  # fmt: skip
        small = timed([*FARM, "nightly", str(write_suite(root / "s1.yaml", models[:1], 4))],
                      {**sim, "FARM_HOME": str(root / "n1")})  # fmt: skip
        big = timed([*FARM, "nightly", str(write_suite(root / "s200.yaml", models, 4))],
                    {**sim, "FARM_HOME": str(root / "n200")})  # fmt: skip
        figures["per-job (200-job nightly)"] = (big - small) / 196
        print(f"{tree}: nightly 4 jobs {small:.2f} s, 200 jobs {big:.2f} s (measured)", flush=True)
    return figures


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Submits timed per figure (median).")
    parser.add_argument("--skip-nightly", action="store_true", help="Only the submit figures.")
    parser.add_argument(
        "--export-token",
        action="store_true",
        help="Export RAY_AUTH_MODE/RAY_AUTH_TOKEN_PATH to the submitter (farm before issue #21 needs it).",
    )
    parser.add_argument("--baseline", type=Path, help="Another farm checkout, measured beside this one.")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="farm-overheads-"))
    model = tiny_model(root / "tiny.onnx")
    trees = {"after": os.getcwd()}
    if args.baseline is not None:
        trees = {"before": str(args.baseline.resolve()), **trees}
    print(f"load average (1, 5, 15 min) at the start: {load_average()}; {os.cpu_count()} CPUs", flush=True)
    results: dict[str, dict[str, float]] = {}
    try:
        for label, tree in trees.items():
            results[label] = measure(
                tree, root / label, model, args.repeats, args.skip_nightly, args.export_token
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at the end: {load_average()}")
    after = results["after"]
    before = results.get("before")
    header = f"{'figure (measured, wall)':28}"
    header += f" {'before s':>9}" if before else ""
    header += f" {'after s':>9} {'goal s':>7} {'after/goal':>10}"
    header += f" {'after/before':>12}" if before else ""
    print(header)
    for name, seconds in after.items():
        goal = GOALS_S[name]
        line = f"{name:28}"
        line += f" {before[name]:9.3f}" if before else ""
        line += f" {seconds:9.3f} {goal:7.3f} {seconds / goal:10.2f}"
        line += f" {seconds / before[name]:12.2f}" if before else ""
        print(line)


if __name__ == "__main__":
    main()
