"""A sysfs value that moves with time while a job runs: a thermal zone that warms, a GPU clock that
steps down, so that per-window telemetry differs from window to window.

A file read once per window at a fixed value makes "one reading per window, in window order" a
claim no test can check: every window would show the same number whatever window it came from.
Here a thread rewrites the file every `update_ms`, moving it linearly with the time since it was
started (or since `begin_when` first held: e.g. once the runner's sustained phase has begun), from
`start` at `rate_per_s` (synthetic: chosen for the tests, not a recording), held at `end`. Nothing
here knows when a window begins or ends: a later reading reads a value at least as far along, so
the windows of one run read values that rise (or fall) in window order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.sysfs_script import write_sysfs


@dataclass(frozen=True)
class Ramp:
    start: float
    end: float
    rate_per_s: float
    update_ms: float = 10.0

    def at(self, elapsed_s: float) -> float:
        moved = self.start + self.rate_per_s * elapsed_s
        return min(moved, self.end) if self.end >= self.start else max(moved, self.end)


#: how often `begin_when` is asked, before the ramp begins
BEGIN_POLL_S = 0.05


class ScriptedRamp:
    """Writes `path` as `ramp.at(seconds since it began)` times `scale`, as an integer: it begins
    at __enter__, or once `begin_when()` is true."""

    def __init__(
        self, path: Path, ramp: Ramp, scale: float = 1.0, begin_when: Callable[[], bool] | None = None
    ) -> None:
        self.path = path
        self.ramp = ramp
        self.scale = scale
        self._begin_when = begin_when
        #: seconds from __enter__ to the ramp's beginning, once it began
        self.began_after_s: float | None = None
        self._stop = threading.Event()
        self._began = 0.0
        self._write(ramp.start)
        self._thread = threading.Thread(target=self._loop, name=f"scripted-{path.parent.name}", daemon=True)

    def _write(self, value: float) -> None:
        write_sysfs(self.path.parent, self.path.name, str(round(value * self.scale)))

    def __enter__(self) -> ScriptedRamp:
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        if self._begin_when is not None:
            while not self._begin_when():
                if self._stop.wait(BEGIN_POLL_S):
                    return
            entered, self._began = self._began, time.monotonic()
            self.began_after_s = self._began - entered
        else:
            self.began_after_s = 0.0
        while not self._stop.wait(self.ramp.update_ms / 1000):
            self._write(self.ramp.at(time.monotonic() - self._began))
