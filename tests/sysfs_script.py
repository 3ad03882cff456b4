"""What the scripted sysfs files of the tests share (the ADB peer's battery, the host's RAPL
counter): an atomic write, and the share of the load a measured number of busy cores stands for."""

from __future__ import annotations

import os
from pathlib import Path


def write_sysfs(directory: Path, name: str, value: str) -> None:
    """Through a rename, as a reader of sysfs never sees half a number."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(value + "\n")
    os.replace(tmp, directory / name)


def load_share(busy_cores: float, idle_cores: float, saturation_cores: float) -> float:
    """0 at `idle_cores` busy cores (housekeeping: a shell or a reader polling now and then), rising
    linearly to 1 at `saturation_cores` (one thread running inferences back to back gets at least
    that much of a core even on a loaded test machine)."""
    return min(1.0, max(0.0, (busy_cores - idle_cores) / (saturation_cores - idle_cores)))
