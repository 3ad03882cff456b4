"""Noise controls on iOS: CoreML takes no thread count or spinning setting and iOS lets no app pin
itself to cores, so a run records all three as not controllable, whatever the request asked."""

from __future__ import annotations

from ondevice_farm_agents.ios.agent import IosAgent

from .conftest import MakeRequest

NOT_CONTROLLABLE = {
    "threads": "not controllable",
    "affinity": "not controllable",
    "spinning": "not controllable",
}


def test_a_run_records_threads_affinity_and_spinning_as_not_controllable(
    ios_agent: IosAgent, make_request: MakeRequest
) -> None:
    (unit,) = ios_agent.discover()
    request = make_request(cpu_affinity=(4, 5), allow_spinning=False, intra_op_threads=1)

    run = ios_agent.run(unit, request)

    assert run.controls == NOT_CONTROLLABLE
    assert ios_agent.session_controls(unit, request) == NOT_CONTROLLABLE
