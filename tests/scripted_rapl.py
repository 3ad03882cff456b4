"""A scripted RAPL package counter: `sys/class/powercap/intel-rapl:0` under a telemetry root.

What changes over time is the load, as with the ADB peer's scripted battery
(tests/android/adb_peer/battery.py): every `update_ms` a thread adds up the CPU time the job's
own threads or processes used since the last update (from /proc schedstat) and advances
`energy_uj` by `idle_w + (load_w - idle_w) x share` for that time, where share rises linearly from
0 at `idle_cores` busy cores (housekeeping: a thread reading the counter now and then) to 1 at
`saturation_cores` (one thread running inferences back to back gets at least that much of a core
even on a loaded test machine). The counter wraps at `max_energy_range_uj`, as RAPL's does.
Nothing here knows when the agent's windows begin or end: a reader that idles reads the idle
power, one that runs inferences the load power.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.sysfs_script import load_share, write_sysfs

RAPL_DIR = "sys/class/powercap/intel-rapl:0"
UJ_PER_J = 1e6
NS_PER_S = 1e9


@dataclass(frozen=True)
class RaplScript:
    idle_w: float
    load_w: float
    start_uj: int = 0
    #: a real package's range (262 kJ); a small one makes the counter wrap during a job
    max_energy_range_uj: int = 262_143_328_850
    idle_cores: float = 0.05
    saturation_cores: float = 0.25
    update_ms: float = 10.0

    def power_w(self, busy_cores: float) -> float:
        share = load_share(busy_cores, self.idle_cores, self.saturation_cores)
        return self.idle_w + (self.load_w - self.idle_w) * share


def _task_cpu_ns(pid: int) -> Iterator[tuple[tuple[int, int], int]]:
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                yield (pid, int(tid)), int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended while being read


def _parents() -> dict[int, int]:
    """pid -> its parent's pid, for every process now."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue  # it ended while being read
        # "pid (comm) state ppid ...": comm may hold spaces and ')'
        parents[int(entry)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    return parents


def process_tree(root_pid: int) -> Callable[[], list[int]]:
    """The processes to count: `root_pid` and everything it started (a `farm submit` and the Ray
    cluster it starts)."""

    def pids() -> list[int]:
        children: dict[int, list[int]] = {}
        for pid, parent in _parents().items():
            children.setdefault(parent, []).append(pid)
        tree, todo = [], [root_pid]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        return tree

    return pids


def this_process() -> list[int]:
    """This test process (an agent run in-process); the counter's own thread is left out."""
    return [os.getpid()]


class ScriptedRapl:
    """Writes the counter's files under `root` and keeps `energy_uj` following the job's load."""

    def __init__(self, root: Path, script: RaplScript, pids: Callable[[], list[int]]) -> None:
        self.script = script
        self.dir = root / RAPL_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self._pids = pids
        self._seen: dict[tuple[int, int], int] = {}
        self._own_tid = -1
        self._stop = threading.Event()
        self._energy_uj = float(script.start_uj)
        #: how often `energy_uj` wrapped at `max_energy_range_uj`
        self.wraps = 0
        self._write("name", "package-0")
        self._write("max_energy_range_uj", str(script.max_energy_range_uj))
        self._write("energy_uj", str(script.start_uj))
        self._thread = threading.Thread(target=self._loop, name="scripted-rapl", daemon=True)

    def __enter__(self) -> ScriptedRapl:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _write(self, name: str, value: str) -> None:
        write_sysfs(self.dir, name, value)

    def _busy_ns(self) -> int:
        used = 0
        alive: dict[tuple[int, int], int] = {}
        for pid in self._pids():
            try:
                tasks = list(_task_cpu_ns(pid))
            except OSError:
                continue  # the process ended while being read
            for key, cpu in tasks:
                if key[1] == self._own_tid:
                    continue
                used += cpu - self._seen.get(key, cpu if not self._seen else 0)
                alive[key] = cpu
        self._seen = alive
        return used

    def _loop(self) -> None:
        self._own_tid = threading.get_native_id()
        period_s = self.script.update_ms / 1000
        self._busy_ns()
        last = time.monotonic()
        while not self._stop.wait(period_s):
            busy = self._busy_ns()
            now = time.monotonic()
            dt = now - last
            last = now
            self._energy_uj += self.script.power_w(busy / (dt * NS_PER_S)) * dt * UJ_PER_J
            if self._energy_uj >= self.script.max_energy_range_uj:
                self._energy_uj -= self.script.max_energy_range_uj
                self.wraps += 1
            self._write("energy_uj", str(int(self._energy_uj)))
