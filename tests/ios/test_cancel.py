"""A cancelled job on an iPhone: the host ends FarmRunner through process control at its next
poll, and the job raises `JobCancelledError` instead of waiting for a result."""

from __future__ import annotations

import threading
import time

import pytest

from ondevice_farm.errors import JobCancelledError
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID

from .conftest import MakeAgent, MakePhone, MakeRequest


def test_a_cancel_ends_the_app_and_the_job(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone(behaviour="silent")  # an app busy with a long job: it writes no result
    agent = make_agent(phone, extra={"ios_thermal_deadline_s": "0", "ios_poll_s": "0.05"})
    (unit,) = agent.discover()
    errors: list[BaseException] = []

    def job() -> None:
        try:
            agent.run(unit, make_request(timeout_s=600))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while phone.pid_of(DEFAULT_BUNDLE_ID) == 0:
        assert time.monotonic() < deadline, "FarmRunner was never launched"
        time.sleep(0.02)
    pid = phone.pid_of(DEFAULT_BUNDLE_ID)

    agent.cancel(unit)
    thread.join(5.0)

    assert not thread.is_alive(), "the job still waits for the app after the cancel"
    assert len(errors) == 1 and isinstance(errors[0], JobCancelledError), errors
    assert phone.pid_of(DEFAULT_BUNDLE_ID) == 0 and not phone.processes[pid].running
    assert ("kill", str(pid)) in phone.operations


def test_a_cancel_before_the_launch_starts_no_app(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    agent = make_agent(phone, extra={"ios_thermal_deadline_s": "0"})
    (unit,) = agent.discover()
    agent.begin_job(unit)
    agent.cancel(unit)
    with pytest.raises(JobCancelledError):
        agent.run(unit, make_request())
    assert not any(op == "launch" for op, _ in phone.operations)
    agent.begin_job(unit)  # the next job is not cancelled
    assert agent.run(unit, make_request(runs=2)).samples_ms
