"""A detached job's deadline (`jobs.run_detached`), against a scripted unit on a simulated clock:
nothing races, so what a job that ends near its deadline is can be pinned exactly.

The unit answers the job's shell calls as a phone does: `started` for the launch, the runner's
exit status in rc.txt from `ends_at_s` on (never, for None), the output's tail, and the kill.
Each call takes `latency_s` of the clock, as over a slow link, and reads rc.txt as it returns;
the job's sleeps move the clock without waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ondevice_farm.errors import DeviceTimeoutError
from ondevice_farm_agents.android import jobs
from ondevice_farm_agents.android.transport import ShellResult

JOB_DIR = "/data/local/tmp/farm/jobs/scripted"
TIMEOUT_S = 1.0
EXIT_CODE = 3  # not 0: the result is the runner's own status


class SimulatedClock:
    """`run_detached`'s clock and sleep: from 0 s, moved only by the calls."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds


@dataclass(frozen=True)
class Poll:
    began_s: float
    ended_s: float
    found: bool


@dataclass
class ScriptedUnit:
    """A `jobs.JobShell` whose runner ends at `ends_at_s` on `clock`."""

    clock: SimulatedClock
    ends_at_s: float | None
    latency_s: float = 0.0
    #: the runner ends just after the first poll that began before the deadline and returned after it
    ends_after_straddling_poll: bool = False
    serial: str = "scripted"
    started_at_s: float | None = None
    polls: list[Poll] = field(default_factory=list)
    killed_at_s: float | None = None

    def cancelled(self) -> bool:
        return False

    def shell(self, command: str, timeout_s: float | None = None) -> ShellResult:
        began = self.clock.now_s
        self.clock.now_s += self.latency_s
        if "nohup" in command:
            self.started_at_s = self.clock.now_s
            return ShellResult("started\n", 0)
        if "/rc.txt 2>/dev/null" in command:
            ended = self.ends_at_s is not None and self.ends_at_s <= self.clock.now_s
            self.polls.append(Poll(began, self.clock.now_s, ended))
            if self.ends_after_straddling_poll and began <= self.deadline_s < self.clock.now_s:
                self.ends_at_s = self.clock.now_s + 0.001
                self.ends_after_straddling_poll = False
            return ShellResult(f"{EXIT_CODE}\n" if ended else "", 0)
        if command.startswith("tail -c"):
            return ShellResult("the runner's output", 0)
        if "kill -9" in command:
            self.killed_at_s = self.clock.now_s
            return ShellResult("", 0)
        raise AssertionError(f"a command the job should not send: {command}")

    @property
    def deadline_s(self) -> float:
        assert self.started_at_s is not None
        return self.started_at_s + TIMEOUT_S


def run(unit: ScriptedUnit) -> jobs.JobResult:
    clock = unit.clock
    return jobs.run_detached(unit, JOB_DIR, "runner", TIMEOUT_S, sleep=clock.sleep, clock=clock.monotonic)


def test_a_runner_that_ends_after_its_deadline_but_before_the_next_poll_is_its_result() -> None:
    unit = ScriptedUnit(SimulatedClock(), ends_at_s=TIMEOUT_S + 0.001)

    result = run(unit)

    assert result == jobs.JobResult(EXIT_CODE, "the runner's output")
    assert unit.killed_at_s is None
    # the scenario: the runner ended past the deadline, and a poll begun past it found its status
    *before, found = unit.polls
    assert unit.ends_at_s is not None and unit.ends_at_s > unit.deadline_s
    assert found.found and found.began_s > unit.deadline_s
    assert before and not any(poll.found for poll in before)
    assert all(poll.began_s <= unit.deadline_s for poll in before)


def test_a_poll_that_straddles_the_deadline_is_followed_by_one_more() -> None:
    # each call takes 0.3 s: a poll begins before the deadline and returns after it, empty; the
    # runner ends just after it, and the next poll finds its status
    unit = ScriptedUnit(SimulatedClock(), ends_at_s=None, latency_s=0.3, ends_after_straddling_poll=True)

    result = run(unit)

    assert result.exit_code == EXIT_CODE and unit.killed_at_s is None
    *before, found = unit.polls
    straddling = before[-1]
    assert straddling.began_s <= unit.deadline_s < straddling.ended_s and not straddling.found
    assert found.found and found.began_s > unit.deadline_s


def test_a_runner_still_running_at_the_first_poll_past_its_deadline_is_stopped_and_times_out() -> None:
    unit = ScriptedUnit(SimulatedClock(), ends_at_s=None)

    with pytest.raises(DeviceTimeoutError, match=r"past its 1 s deadline"):
        run(unit)

    assert unit.killed_at_s is not None
    # stopped after one poll begun past the deadline found nothing, and polled no more
    past = [poll for poll in unit.polls if poll.began_s > unit.deadline_s]
    assert len(past) == 1 and not past[0].found
    assert unit.polls[-1] == past[0] and past[0].ended_s <= unit.killed_at_s
