"""Run a long command on a unit in the background and wait for it by polling.

A benchmark may be silent for minutes; holding one shell stream open for it would make a
stalled link indistinguishable from a slow model. Instead the command is started detached
(`nohup`), and short, time-bounded calls poll for its exit status, so a link that stops
answering is noticed within the I/O timeout while the job itself may take `timeout_s`.

The detached shell writes its pid to `pid` in the job directory: a job past its deadline, or
cancelled (`AdbConnection.cancelled`, checked at every poll), is stopped by that pid (the runner
below the shell, then the shell), on the same connection, from the thread that waits for it.

The deadline bounds how long the agent waits, not when the runner must end: whenever a poll finds
the exit status, that is the job's result, and the job times out only when a poll begun after the
deadline finds none (a runner that ended between the deadline and that poll has its result).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Protocol

from ondevice_farm.errors import DeviceError, DeviceTimeoutError, JobCancelledError
from ondevice_farm_agents.android.device_paths import q
from ondevice_farm_agents.android.transport import ShellResult

DEFAULT_FIRST_POLL_S = 0.05
DEFAULT_MAX_POLL_S = 1.0
OUTPUT_TAIL_BYTES = 256 * 1024


class JobShell(Protocol):
    """What a detached job needs of a unit's connection (`AdbConnection` is one)."""

    @property
    def serial(self) -> str: ...

    def cancelled(self) -> bool: ...

    def shell(self, command: str, timeout_s: float | None = None) -> ShellResult: ...


@dataclass(frozen=True)
class JobResult:
    exit_code: int
    output: str


def run_detached(
    conn: JobShell,
    job_dir: str,
    command: str,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> JobResult:
    """Run `command` (already quoted) with cwd `job_dir`; its exit status and combined output.

    The deadline, `timeout_s` after the start, bounds how long the agent waits: a poll begun
    past it that finds no exit status stops the job (`stop_detached`) and raises
    `DeviceTimeoutError`. A runner that finished after the deadline but before that poll is not
    late: its exit status, once found, is the result (a runner that completed has measured).
    """
    if conn.cancelled():
        raise JobCancelledError(f"{conn.serial}: the job was cancelled before its runner started")
    inner = (
        f"cd {q(job_dir)} && echo $$ > pid && {{ {command} ; }} > out.txt 2>&1; "
        "echo $? > rc.tmp; mv rc.tmp rc.txt"
    )
    started = conn.shell(
        f"mkdir -p {q(job_dir)} && rm -f {q(job_dir)}/rc.txt && "
        f"(nohup sh -c {q(inner)} > /dev/null 2>&1 &) ; echo started"
    )
    if not started.ok or "started" not in started.output:
        raise DeviceError(f"{conn.serial}: could not start the job: {started.output.strip()[-300:]}")
    deadline = clock() + timeout_s
    pause = DEFAULT_FIRST_POLL_S
    rc_path = f"{q(job_dir)}/rc.txt"
    while True:
        polled_at = clock()
        status = conn.shell(f"cat {rc_path} 2>/dev/null; true")
        if status.output.strip():
            break
        if conn.cancelled():
            with suppress(DeviceError):  # a link lost now: the runner ends with the phone's session
                stop_detached(conn, job_dir)
            raise JobCancelledError(f"{conn.serial}: the job was cancelled; its runner was stopped")
        if polled_at > deadline:  # a poll that straddled the deadline is followed by one more
            stop_detached(conn, job_dir)
            raise DeviceTimeoutError(f"{conn.serial}: the job ran past its {timeout_s:g} s deadline")
        sleep(pause)
        pause = min(pause * 1.5, DEFAULT_MAX_POLL_S)
    output = conn.shell(f"tail -c {OUTPUT_TAIL_BYTES} {q(job_dir)}/out.txt")
    return JobResult(int(status.output.strip().splitlines()[-1]), output.output)


def stop_detached(conn: JobShell, job_dir: str) -> None:
    """SIGKILL the job's runner (the children of the shell whose pid the job wrote), then the shell."""
    pid = f"$(cat {q(job_dir)}/pid)"
    conn.shell(f"pkill -9 -P {pid}; kill -9 {pid}; true")
