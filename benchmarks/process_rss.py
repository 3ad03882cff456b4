"""Peak resident memory of process trees, sampled on a thread, per process kind (benchmarks/lab_scale.py).

A root is named by the caller (`farm serve`, `farm nightly`, a node's `ray start`); a process below
it is named by its title: Ray titles a worker `ray::<class>` (`ray::<class>.<method>` while it runs
one), so every DeviceActor, the fleet actor and idle workers are kinds of their own; anything else by
its program's name (raylet, gcs_server, ...). A kind's figure is the largest RSS any one process of
it reached (a per-process peak: a farm process that holds a night grows; a kind with more processes
does not), with how many processes it had. Sampled, so a peak shorter than the interval can be
missed: the interval is the figure's resolution.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field

import psutil

MIB = 2**20


@dataclass
class KindPeak:
    peak_bytes: int = 0
    pids: set[int] = field(default_factory=set)


def process_kind(process: psutil.Process) -> str:
    """`ray::FleetActor`, `raylet`, `python`, ... (see the module docstring)."""
    try:
        cmdline = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if not cmdline:
        return str(process.name())
    first = str(cmdline[0])
    if first.startswith("ray::"):
        return first.split(".")[0].split(" ")[0]
    name = os.path.basename(first)
    if name.startswith("python") and len(cmdline) > 1:
        # a Python program: its script or module is what it is
        script = str(cmdline[2] if cmdline[1] == "-m" and len(cmdline) > 2 else cmdline[1])
        return f"python {os.path.basename(script)}"
    return name


class TreeSampler:
    """Samples every `interval_s` the RSS of each root's tree until stopped."""

    def __init__(self, roots: dict[str, int], interval_s: float = 1.0) -> None:
        #: root pid -> the kind its own process is counted as
        self.roots = {pid: name for name, pid in roots.items()}
        self.interval_s = interval_s
        self.kinds: dict[str, KindPeak] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def add_root(self, name: str, pid: int) -> None:
        self.roots[pid] = name

    def sample(self) -> None:
        seen: set[int] = set()
        for pid, name in list(self.roots.items()):
            try:
                root = psutil.Process(pid)
                tree = [(root, name), *((child, "") for child in root.children(recursive=True))]
            except psutil.NoSuchProcess:
                continue
            for process, kind in tree:
                if process.pid in seen:
                    continue
                seen.add(process.pid)
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    rss = process.memory_info().rss
                    peak = self.kinds.setdefault(kind or process_kind(process), KindPeak())
                    peak.peak_bytes = max(peak.peak_bytes, rss)
                    peak.pids.add(process.pid)
        self.samples += 1

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                return

    def peaks_mib(self) -> dict[str, float]:
        return {kind: peak.peak_bytes / MIB for kind, peak in sorted(self.kinds.items())}

    def counts(self) -> dict[str, int]:
        return {kind: len(peak.pids) for kind, peak in sorted(self.kinds.items())}
