"""A plain `farm submit` beside a running `farm serve`: what the local controller saves.

    unshare -n sh -c 'ip link set lo up && .venv/bin/python benchmarks/local_controller.py'

Starts `farm serve` (an embedded Ray bound to 127.0.0.1, its submit API on a free port) with a
farm directory and HOME of its own, then times, with the real CLI as a user types it and nothing
exported, `farm submit examples/tinynet.onnx -d host-cpu` (its defaults: 50 timed runs, the
profiled pass, the terminal report): the first (uploads the model, compiles, computes the
reference, reads the graph for the slowest-kernels table), then `--repeat` more, each one's wall
time and the CPU time of the submitting process; then one `--embedded` submit and `farm --version`
(the floor any command pays on this machine). The load average is printed at the start and the
end: on the shared 2-core development machine it moves every figure.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FARM = str(Path(sys.executable).parent / "farm")
MODEL = str(ROOT / "examples" / "tinynet.onnx")
START_TIMEOUT_S = 180.0
USED = "submitting to the farm controller at"


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, bool]:
    """(wall seconds, CPU seconds of the command, whether it went to the controller)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    done = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, USED in done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="Plain submits after the first.")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="farm-local-controller-"))
    (root / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "FARM_"))}
    env.update(HOME=str(root / "home"), FARM_HOME=str(root / "farm"), RAY_USAGE_STATS_ENABLED="0")
    print(f"load average at the start: {os.getloadavg()}")
    serve = subprocess.Popen(
        [FARM, "serve", "--api-port", "0"], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert serve.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = serve.stderr.readline()
            if not line:
                raise SystemExit("farm serve exited before its submit API listened")
            if re.search(r"submit API on http://\S+", line):
                break
        # its log, read on so that it never blocks on a full pipe
        threading.Thread(target=serve.stderr.read, daemon=True).start()
        time.sleep(5.0)  # its own host unit registers
        submit = [FARM, "submit", MODEL, "-d", "host-cpu"]
        wall, cpu, used = timed(submit, env)
        print(f"first plain submit: wall {wall:.3f} s, cpu {cpu:.3f} s, through the controller: {used}")
        walls = []
        for _ in range(options.repeat):
            wall, cpu, used = timed(submit, env)
            walls.append(wall)
            print(f"plain submit: wall {wall:.3f} s, cpu {cpu:.3f} s, through the controller: {used}")
        print(f"plain submits after the first: median wall {statistics.median(walls):.3f} s of {len(walls)}")
        wall, cpu, _ = timed([FARM, "--version"], env)
        print(f"farm --version: wall {wall:.3f} s, cpu {cpu:.3f} s")
        wall, cpu, used = timed([*submit, "--embedded"], env)
        print(f"--embedded submit: wall {wall:.3f} s, cpu {cpu:.3f} s, through the controller: {used}")
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
