"""The embedded Ray dies with its submitter, however the submitter dies.

Ctrl-C and SIGTERM stop an embedded Ray through `ray.shutdown()`. `kill -9` (an OOM kill, a CI
runner's timeout) runs no code: Ray's GCS and raylet die with their parent (Ray starts them with
PR_SET_PDEATHSIG) but the workers below the raylet, a `DeviceActor` in the middle of a job among
them, are re-parented to init and run on. This watchdog, a small process of its own started
beside the embedded Ray, remembers the submitter's descendants and, once the submitter is gone,
SIGKILLs those still alive and everything below them, within about `DEFAULT_POLL_S` (Linux /proc).

    python farm/ondevice_farm/controller/watchdog.py PARENT_PID [POLL_S]    (standard library only)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: how often the watchdog looks at the submitter and its descendants; a kill -9'd submitter's
#: processes are gone within about twice this
DEFAULT_POLL_S = 0.5
PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(state, parent pid, start time) of a process, None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), fields[19]


def _parents() -> dict[int, int]:
    parents = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents[int(entry.name)] = stat[1]
    return parents


def _below(roots: set[int], parents: dict[int, int]) -> set[int]:
    """Every process whose ancestry reaches one of `roots` (roots excluded)."""
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found - roots
        found |= frontier
    return found


def _alive(pid: int, started: str) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == started and stat[0] not in ("Z", "X")


def watch(parent: int, poll_s: float = DEFAULT_POLL_S) -> list[int]:
    """Until `parent` dies; then kill what it left behind. Returns the pids killed."""
    first = _stat(parent)
    if first is None:
        return []
    parent_started = first[2]
    me = os.getpid()
    known: dict[int, str] = {}  # pid -> start time, so a reused pid is never killed
    while _alive(parent, parent_started):
        for pid in _below({parent}, _parents()) - {me}:
            stat = _stat(pid)
            if stat is not None:
                known.setdefault(pid, stat[2])
        time.sleep(poll_s)
    survivors = {pid for pid, started in known.items() if _alive(pid, started)}
    targets = (survivors | _below(survivors, _parents())) - {me}
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return sorted(targets)


class Watchdog:
    """The watchdog process of this one, started before the embedded Ray and stopped after it."""

    def __init__(self, poll_s: float = DEFAULT_POLL_S) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), str(os.getpid()), str(poll_s)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal is for the submitter, not for it
        )

    def stop(self) -> None:
        """A clean exit: Ray is already stopped, nothing is left to reap."""
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_POLL_S)


if __name__ == "__main__":
    main()
