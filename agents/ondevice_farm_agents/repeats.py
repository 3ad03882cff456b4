"""A job measured in K sessions: the agent's full run, then K-1 more fresh sessions.

Latency is dominated by state fixed for a whole session (thread placement, allocator layout,
the clock and thermal state a phone starts in), so samples within one session are not
independent draws: the spread between sessions is what a slowdown must beat. The first session
is the agent's own `run` (outputs, first inference, memory, per-op profile); each further one is
`DeviceAgent.measure_session`: its own first inference, warm-up and timed runs.
"""

from __future__ import annotations

from ondevice_farm_agents.base import DeviceAgent, DeviceRun, DeviceUnit, RunRequest
from ondevice_farm_agents.paired import RoundListener, attach_paired


def run_repeats(
    agent: DeviceAgent, unit: DeviceUnit, request: RunRequest, on_round: RoundListener | None = None
) -> DeviceRun:
    """`on_round`: told after each paired round, where the request has them."""
    if request.repeats < 1:
        raise ValueError("a job needs at least one measurement session")
    run = agent.run(unit, request)
    agent.cancellation.check(unit.serial)
    sessions = [list(run.samples_ms)]
    for _ in range(request.repeats - 1):
        agent.cancellation.check(unit.serial)  # a cancel that came as a session ended
        sessions.append(list(agent.measure_session(unit, request)))
    # a runner that reports only a summary (onnxruntime_perf_test) has no samples to keep
    run.repeat_samples_ms = sessions if all(sessions) else []
    if not run.controls:
        run.controls = agent.session_controls(unit, request)
    return attach_paired(agent, unit, run, request, on_round)
