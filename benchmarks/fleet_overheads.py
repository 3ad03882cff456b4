"""What the fleet costs around a job: warm submit, cold submit, per job in a big nightly.

    unshare -n sh -c 'ip link set lo up && PYTHONPATH=$PWD .venv/bin/python benchmarks/fleet_overheads.py'

All measured here, wall clock, with the real CLI as a user runs it, a tiny model (Relu, Sigmoid on
1x64: its own inference takes microseconds), one timed run, no warm-up, no profiled pass:

- warm: `farm submit --address http://...` to the submit API of a `farm serve` already running on
  this host (the goal's figure), and `farm submit --address HOST:PORT` to the same controller
  through Ray (a Ray driver: import, connect, leave). Its embedded Ray is bound to 127.0.0.1,
  token auth as Ray sets it up; the submitter exports no RAY_* variable.
- cold: `farm submit` with no address: starts and stops an embedded Ray.
- nightly: `farm nightly` (embedded) of 50 models x 4 simulated units = 200 jobs against the same
  suite with 1 model (4 jobs): per-job overhead = (T200 - T4) / 196, everything a job costs
  (compile, reference, scheduling, storing) amortised over 4 units.

Prints each figure beside its goal from issue #21 and the ratio figure/goal. With `--baseline
DIR` (a checkout of another farm version, e.g. `git worktree add /tmp/before COMMIT`), every
figure is measured for it too, in the same run, block by block (baseline first), and printed
before | after side by side. The load average is printed at the start and the end: on a shared
machine it moves every figure. HOME and FARM_HOME are temp dirs: the Ray token this creates is
not the user's. PYTHONDONTWRITEBYTECODE is dropped from the commands' environment: an installed
farm has its bytecode, and recompiling every module each time would add about 0.1 s to each.
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
#: what an embedded farm's Ray costs before the farm does anything: the same `ray.init` as
#: farm/ondevice_farm/controller/cluster.py, then `ray.shutdown` (the floor under a cold submit)
RAY_ALONE = """
import logging, os, ray
ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=os.cpu_count(),
         object_store_memory=256 * 1024 * 1024, namespace="farm", log_to_driver=False,
         logging_level=logging.ERROR)
ray.shutdown()
"""
GOALS_S = {
    "warm submit (API)": 0.5,
    "warm submit (Ray client)": 0.5,
    "cold submit": 3.0,
    "per-job (200-job nightly)": 0.05,
    "Ray alone: import, start, stop": 3.0,  # the cold submit's goal: what is left to the farm
}


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


def timed(
    args: list[str], env: dict[str, str], timeout_s: float = 600, ok_codes: tuple[int, ...] = (0,)
) -> float:
    began = time.perf_counter()
    # in the tree's own root: `python -m` puts the working directory first on sys.path
    done = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=timeout_s, cwd=env.get("PYTHONPATH")
    )
    took = time.perf_counter() - began
    if done.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(args[2:])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def write_suite(path: Path, models: list[Path], units: int) -> Path:
    lines = ["name: overheads", f"devices: [{', '.join(f'simulated:sim-{i}' for i in range(units))}]"]
    lines += ["runs: 1", "warmup: 0", "models:"] + [f"  - path: {m}" for m in models]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_serve(env: dict[str, str], tree: str) -> tuple[subprocess.Popen[str], str, str | None]:
    """`farm serve`, its Ray address and its submit API (None: a farm from before the API)."""
    has_api = "--api-port" in (Path(tree) / "farm" / "ondevice_farm" / "cli" / "serve.py").read_text()
    serve = subprocess.Popen(
        [*FARM, "serve", *(["--api-port", "0"] if has_api else [])], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=env.get("PYTHONPATH"),
    )  # fmt: skip
    assert serve.stderr is not None
    deadline = time.monotonic() + 120
    address = None
    for line in serve.stderr:
        if found := re.search(r"embedded Ray at (\S+?);", line):
            address = found.group(1)
            if not has_api:
                return serve, address, None
        if (found := re.search(r"submit API on (http://\S+?):? ", line)) and address is not None:
            return serve, address, found.group(1)
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
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAY_", "FARM_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(HOME=str(root / "user"), RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=tree)
    submit = ["submit", str(model), "--devices", "host-cpu", "--runs", "1", "--warmup", "0", "--no-profile"]
    figures: dict[str, float] = {}
    serve, address, api_url = start_serve({**env, "FARM_HOME": str(root / "head")}, tree)
    try:
        submitter = {**env, "FARM_HOME": str(root / "runner")}
        if export_token:
            submitter.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(root / "user/.ray/auth_token"))
        kinds = {"warm submit (Ray client)": address}
        if api_url is not None:
            kinds = {"warm submit (API)": api_url, **kinds}
        for name, where in kinds.items():
            timed([*FARM, *submit, "--address", where], submitter)  # first: the caches filled
            figures[name] = statistics.median(
                [timed([*FARM, *submit, "--address", where], submitter) for _ in range(repeats)]
            )
    finally:
        stop(serve)
    cold_env = {**env, "FARM_HOME": str(root / "cold")}
    timed([*FARM, *submit], cold_env)  # the same: a user's second submit of a model
    figures["cold submit"] = statistics.median([timed([*FARM, *submit], cold_env) for _ in range(repeats)])
    if not skip_nightly:
        models = [tiny_model(root / f"m{i:02d}.onnx", 16 + i) for i in range(50)]
        sim = {**env, "FARM_SIMULATED_DEVICES": "4", "FARM_AGENT_SIMULATED_LATENCY_MS": "0.1",
               "FARM_AGENT_SIMULATED_PREFIX": "sim"}  # fmt: skip
        walls = {}
        # a farm that refuses a nightly on simulated units unless asked (issue 34) is asked
        nightly_cli = (Path(tree) / "farm" / "ondevice_farm" / "cli" / "nightly.py").read_text()
        allow = ["--allow-simulated"] if "--allow-simulated" in nightly_cli else []
        for jobs, suite in ((4, write_suite(root / "s1.yaml", models[:1], 4)),
                            (200, write_suite(root / "s200.yaml", models, 4))):  # fmt: skip
            night = {**sim, "FARM_HOME": str(root / f"n{jobs}")}
            # the first night fills the caches and is the next one's baseline; a real nightly
            # reruns the same models against the last night
            command = [*FARM, "nightly", *allow, str(suite)]
            timed(command, night, ok_codes=(0, 1))
            walls[jobs] = statistics.median([timed(command, night, ok_codes=(0, 1)) for _ in range(repeats)])
        figures["per-job (200-job nightly)"] = (walls[200] - walls[4]) / 196
        print(
            f"{tree}: nightly 4 jobs {walls[4]:.2f} s, 200 jobs {walls[200]:.2f} s (measured, medians)",
            flush=True,
        )
    figures["Ray alone: import, start, stop"] = statistics.median(
        [timed([sys.executable, "-c", RAY_ALONE], cold_env) for _ in range(repeats)]
    )
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
        if before is not None:
            line += f" {before[name]:9.3f}" if name in before else f" {'-':>9}"
        line += f" {seconds:9.3f} {goal:7.3f} {seconds / goal:10.2f}"
        if before is not None:
            line += f" {seconds / before[name]:12.2f}" if name in before else f" {'-':>12}"
        print(line)


if __name__ == "__main__":
    main()
