"""A cancel stops the job a unit runs now, on the host for real: the in-process session ended
through ONNX Runtime's terminate flag, a repeat's session process killed by its pid. Processes
are counted before and after; the job raises `JobCancelledError` instead of a result.

Also through the actor (`DeviceActorImpl`, no Ray): `cancel_job` from another thread stops the
job it names and leaves the next job alone.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psutil

from ondevice_farm.controller.actor import DeviceActorImpl
from ondevice_farm.errors import JobCancelledError
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.host.agent import SESSION_SCRIPT, HostAgent
from tests.fleet.cluster import alive, descendants_running
from tests.fleet.conftest import wait_for

#: a cancel must end the job within this (the terminate flag ends the inference in flight; a
#: killed process is reaped at once), even on a loaded two-core machine
STOPPED_WITHIN_S = 10.0
LONG_S = 600.0


def long_request(model: Path, **over: object) -> RunRequest:
    info = inspect_model(model)
    fields: dict[str, object] = {
        "artifact": model,
        "artifact_sha256": info.sha256,
        "target": Target.parse("ort/cpu"),
        "inputs": seeded_inputs(info, resolve_shapes(info, {}), 0),
        "warmup": 0,
        "runs": 3,
        "profile_ops": False,
        **over,
    }
    return RunRequest(**fields)  # type: ignore[arg-type]


def session_processes() -> set[int]:
    """This test's own descendants that run the host's session script."""
    return descendants_running(os.getpid(), SESSION_SCRIPT)


class InThread:
    """`call` on a thread of its own; what it returned or raised."""

    def __init__(self, call: object) -> None:
        self.error: BaseException | None = None
        self.result: object = None

        def body() -> None:
            try:
                self.result = call()  # type: ignore[operator]
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def join(self, timeout_s: float) -> float:
        began = time.monotonic()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"the job still runs {timeout_s} s after the cancel"
        return time.monotonic() - began


def test_a_cancel_kills_a_repeats_session_process_by_its_pid(tiny_model: Path) -> None:
    agent = HostAgent(AgentSettings())
    (unit, *_) = agent.discover()
    before = session_processes()
    job = InThread(lambda: agent.measure_session(unit, long_request(tiny_model, runs=10**9)))
    try:
        wait_for(lambda: session_processes() - before, 60, "the repeat's session process", interval_s=0.05)
        running = session_processes() - before
        time.sleep(0.5)  # inside its timed runs, not starting up
        agent.cancel(unit)
        took_s = job.join(STOPPED_WITHIN_S)
    finally:
        for pid in alive(session_processes() - before):  # never left running when this test fails
            psutil.Process(pid).kill()
    assert isinstance(job.error, JobCancelledError), job.error
    assert not alive(running), "the session process outlived the cancel"
    assert session_processes() == before
    print(f"repeat session process killed; the job ended {took_s:.2f} s after the cancel")


def test_a_cancel_ends_the_in_process_sustained_phase(tiny_model: Path) -> None:
    agent = HostAgent(AgentSettings())
    (unit, *_) = agent.discover()
    job = InThread(lambda: agent.run(unit, long_request(tiny_model, sustained_s=LONG_S)))
    time.sleep(2.0)  # the session loaded, the sustained phase running
    assert job.thread.is_alive()
    agent.cancel(unit)
    took_s = job.join(STOPPED_WITHIN_S)
    assert isinstance(job.error, JobCancelledError), job.error
    print(f"sustained phase ended {took_s:.2f} s after the cancel")


def test_the_actor_cancels_only_the_job_it_names(tiny_model: Path) -> None:
    agent = HostAgent(AgentSettings())
    (unit, *_) = agent.discover()
    actor = DeviceActorImpl(unit, AgentSettings())
    job = InThread(lambda: actor.run_job(long_request(tiny_model, sustained_s=LONG_S), None, "job-1"))
    time.sleep(1.5)
    assert actor.cancel_job("job-0") is False  # a job that already ended here: nothing stopped
    assert job.thread.is_alive()
    assert actor.cancel_job("job-1") is True
    job.join(STOPPED_WITHIN_S)
    assert isinstance(job.error, JobCancelledError), job.error
    # the cancel was for job-1 only: the next job on the unit runs to its end
    done = actor.run_job(long_request(tiny_model), None, "job-2")
    assert len(done.run.samples_ms) == 3
    assert actor.cancel_job("job-2") is False
