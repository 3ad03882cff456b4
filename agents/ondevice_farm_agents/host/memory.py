"""Peak resident memory of this process over a stretch of work (Linux /proc).

Writing 5 to /proc/self/clear_refs resets VmHWM (the RSS high-water mark), so the
peak of one job can be read even in a long-lived actor process.
"""

from __future__ import annotations

from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class PeakMemory:
    """`with PeakMemory() as peak: ...` then `peak.bytes`: the peak RSS above the start."""

    def __init__(self) -> None:
        self.bytes: int | None = None
        self._start_kib: int | None = None

    def __enter__(self) -> PeakMemory:
        try:
            _CLEAR_REFS.write_text("5")
        except OSError:
            self._start_kib = None
            return self
        self._start_kib = _status_kib("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        peak = _status_kib("VmHWM")
        if self._start_kib is not None and peak is not None:
            self.bytes = max(0, peak - self._start_kib) * 1024
