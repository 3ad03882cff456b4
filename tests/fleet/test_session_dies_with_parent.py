"""A repeat's session process dies with the process that started it, however that one dies.

The host agent runs each repeat after the first in a process of its own
(agents/ondevice_farm_agents/host/session.py). A `DeviceActor` killed with kill -9 (an OOM kill, `ray stop
--force`, a lab host's operator) runs no code that could stop it, so without more the session would run its
timed runs to their end, re-parented, on a host whose next job it disturbs. Here the actor is a plain process
that runs the host agent's `measure_session` with a billion runs; it is killed with SIGKILL once its session
process is inside its timed runs, and that session process (found by pid, with its start time)
must be gone within `GONE_WITHIN_S`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ondevice_farm_agents.host.agent import SESSION_SCRIPT
from tests.fleet.cluster import alive, descendants_running, kill_tree
from tests.fleet.conftest import wait_for

REPO = Path(__file__).resolve().parents[2]
#: the kernel sends the death signal as the parent exits; the rest is this test's polling
GONE_WITHIN_S = 2.0
#: what the stand-in for the actor runs: the host agent's repeat of a job that never ends
ACTOR = """
import sys
from pathlib import Path

from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.host.agent import HostAgent

model = Path(sys.argv[1])
info = inspect_model(model)
request = RunRequest(
    artifact=model,
    artifact_sha256=info.sha256,
    target=Target.parse("ort/cpu"),
    inputs=seeded_inputs(info, resolve_shapes(info, {}), 0),
    warmup=0,
    runs=10**9,
    timeout_s=600,
    profile_ops=False,
)
agent = HostAgent(AgentSettings())
(unit, *_) = agent.discover()
agent.measure_session(unit, request)
"""


def test_a_kill_9_of_the_agents_process_ends_its_session_process(tiny_model: Path) -> None:
    actor = subprocess.Popen(
        [sys.executable, "-c", ACTOR, str(tiny_model)], cwd=REPO, stderr=subprocess.PIPE, text=True
    )
    session: psutil.Process | None = None
    try:
        wait_for(lambda: descendants_running(actor.pid, SESSION_SCRIPT), 60, "the repeat's session process")
        (pid,) = descendants_running(actor.pid, SESSION_SCRIPT)
        session = psutil.Process(pid)
        # inside its timed runs: it has used CPU past the interpreter's start and the session's load
        wait_for(lambda: sum(session.cpu_times()[:2]) > 1.0, 60, "the session's timed runs")
        assert actor.poll() is None, actor.communicate()[1][-2000:]
        os.kill(actor.pid, signal.SIGKILL)
        actor.wait(timeout=10)
        killed = time.monotonic()
        deadline = killed + GONE_WITHIN_S
        while alive({pid}) and time.monotonic() < deadline:
            time.sleep(0.02)
        took_s = time.monotonic() - killed
        left = bool(alive({pid})) and session.is_running()  # is_running: the same process, not a reused pid
        assert not left, f"the session process {pid} still runs {took_s:.1f} s after its parent's kill -9"
    finally:
        kill_tree(actor.pid)
        if session is not None and session.is_running():
            session.kill()
    print(f"kill -9 of the agent's process: its session process was gone {took_s:.3f} s later")
