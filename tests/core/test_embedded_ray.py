"""An embedded Ray runs nothing of the farm's own beside a job but its actors and, at low priority,
its watchdog."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ondevice_farm.controller.cluster import WATCHDOG_NICE, ClusterConfig, ray_cluster


def test_an_embedded_ray_keeps_no_idle_worker_and_a_low_priority_watchdog() -> None:
    """Nothing of the farm's own but its actors runs beside a job: no idle worker per CPU waiting
    for tasks the farm never sends, and its watchdog yields to the measurement."""
    with ray_cluster(ClusterConfig()):
        time.sleep(2)  # where Ray prestarts workers, it does so as the driver connects
        mine = os.getpid()
        procs = _descendants(mine)
        assert [p for p in procs if _argv(p)[:1] == [b"ray::IDLE"]] == []
        watchdogs = [p for p in procs if _is_watchdog_of(p, mine)]
        assert [os.getpriority(os.PRIO_PROCESS, int(p.name)) for p in watchdogs] == [WATCHDOG_NICE]


def _argv(proc: Path) -> list[bytes]:
    try:
        return (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _is_watchdog_of(proc: Path, parent: int) -> bool:
    argv = _argv(proc)
    return any(a.endswith(b"watchdog.py") for a in argv) and str(parent).encode() in argv


def _descendants(root: int) -> list[Path]:
    parents: dict[Path, int] = {}
    for proc in Path("/proc").iterdir():
        try:
            parents[proc] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found: list[Path] = []
    frontier = {root}
    while frontier:
        below = [p for p, parent in parents.items() if parent in frontier and p not in found]
        found += below
        frontier = {int(p.name) for p in below}
    return found
