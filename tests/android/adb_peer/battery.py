"""A scripted battery: `/sys/class/power_supply/battery/*` and `dumpsys battery` for the peer.

The values come from recorded real devices (tests/android/fixtures/README.md, "battery"); what
changes over time is the load: every `update_ms` the peer adds up the CPU time the device's own
processes (everything it spawned, in their sessions) used since the last update, and writes
`current_now` = idle + (load - idle) x share, where share rises linearly from 0 at `idle_cores`
busy cores (housekeeping: a shell polled now and then, a sampling thread) to 1 at
`saturation_cores` (one thread running inferences back to back gets at least that much of a core
even on a loaded test machine), signed the way the script says the unit signs a discharge. A
runner that sleeps reads the idle level; one that runs inferences reads the load level; nothing
here knows what the runner is doing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.sysfs_script import load_share, write_sysfs

SUPPLY_DIR = "sys/class/power_supply/battery"


@dataclass(frozen=True)
class BatteryScript:
    """Recorded levels: `idle_ua` and `load_ua` are discharge currents (positive numbers)."""

    idle_ua: int
    load_ua: int
    voltage_uv: int
    #: the sysfs `status` word, e.g. "Discharging", "Charging", "Not charging"
    status: str
    #: the recorded `dumpsys battery` the unit answers with
    dumpsys: str
    #: the sign the unit gives a discharge current: -1 (kernel ABI, Android API) or +1 (many vendors)
    discharge_sign: int = -1
    #: while charging, the net current into the battery (positive), whatever the load
    charge_ua: int = 0
    idle_cores: float = 0.05
    saturation_cores: float = 0.25
    update_ms: float = 25.0

    def current_ua(self, busy_cores: float) -> int:
        if self.charge_ua:
            return -self.discharge_sign * self.charge_ua
        share = load_share(busy_cores, self.idle_cores, self.saturation_cores)
        return self.discharge_sign * round(self.idle_ua + (self.load_ua - self.idle_ua) * share)

    def power_mw(self, current_ua: float) -> float:
        return abs(current_ua) * self.voltage_uv / 1e9


def _session(stat: str) -> int:
    # /proc/<pid>/stat: "pid (comm) state ppid pgrp session ..."; comm may hold spaces and ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[3])


def _cpu_ns(pid: str) -> int:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
            total += int(handle.read().split()[0])
    return total


class ScriptedBattery:
    """Writes the script's files under `root` and keeps `current_now` following the device's load."""

    def __init__(self, root: Path, script: BatteryScript, sessions: Callable[[], set[int]]) -> None:
        self.script = script
        self.dir = root / SUPPLY_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self._sessions = sessions
        self._stop = threading.Event()
        self._seen: dict[str, int] = {}
        self._write("type", "Battery")
        self._write("status", script.status)
        self._write("voltage_now", str(script.voltage_uv))
        self._write("current_now", str(script.current_ua(0.0)))
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> ScriptedBattery:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _write(self, name: str, value: str) -> None:
        write_sysfs(self.dir, name, value)

    def _busy_ns(self) -> int:
        sessions = self._sessions()
        used = 0
        alive: dict[str, int] = {}
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    if _session(handle.read()) not in sessions:
                        continue
                cpu = _cpu_ns(pid)
            except (OSError, ValueError, IndexError):
                continue  # it ended while being read
            used += cpu - self._seen.get(pid, 0)
            alive[pid] = cpu
        self._seen = alive
        return used

    def _loop(self) -> None:
        period_s = self.script.update_ms / 1000
        self._busy_ns()
        last = time.monotonic()
        while not self._stop.wait(period_s):
            now = time.monotonic()
            busy_cores = self._busy_ns() / ((now - last) * 1e9)
            last = now
            self._write("current_now", str(self.script.current_ua(busy_cores)))
