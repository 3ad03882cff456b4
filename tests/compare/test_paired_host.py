"""The paired rounds on the host agent itself: fresh sessions, pinned, stopped by rounds or budget."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, PairedPlan, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from ondevice_farm_agents.paired import run_paired_rounds

from .conftest import matmul_chain

LAST_CPU = (max(os.sched_getaffinity(0)),)


def _request(model: Path, **kwargs: object) -> RunRequest:
    inputs = {"x": np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)}
    return RunRequest(
        artifact=model,
        artifact_sha256="-",
        target=Target.parse("ort/cpu"),
        inputs=inputs,
        warmup=0,
        runs=3,
        profile_ops=False,
        **kwargs,  # type: ignore[arg-type]
    )


def test_rounds_are_pinned_sessions_in_a_seeded_order_until_the_rounds_end(tmp_path: Path) -> None:
    agent = HostAgent(AgentSettings())
    [unit] = [u for u in agent.discover() if u.profile == "host-cpu"]
    a = matmul_chain(tmp_path / "a.onnx", 1, width=64)
    b = matmul_chain(tmp_path / "b.onnx", 2, width=64)
    candidate = _request(b, cpu_affinity=LAST_CPU, allow_spinning=False)
    plan = PairedPlan(baseline=_request(a, cpu_affinity=LAST_CPU), max_rounds=4, budget_s=600, seed=9)
    trace = run_paired_rounds(agent, unit, candidate, plan)
    again = run_paired_rounds(agent, unit, candidate, plan)
    assert trace.stopped == "max-rounds" and len(trace.rounds) == 4
    assert [r.order for r in trace.rounds] == [r.order for r in again.rounds]
    assert all(len(r.baseline_samples_ms) == 3 and len(r.candidate_samples_ms) == 3 for r in trace.rounds)
    assert trace.controls["affinity"] == str(LAST_CPU[0])
    assert trace.controls["spinning"] == "off"
    # pinned with the runtime's thread count: one thread per pinned CPU, said so
    assert trace.controls["threads"] == "1 (one per pinned CPU)"
    short = run_paired_rounds(agent, unit, candidate, PairedPlan(plan.baseline, 50, budget_s=0.01, seed=1))
    assert short.stopped == "budget" and len(short.rounds) == 1
