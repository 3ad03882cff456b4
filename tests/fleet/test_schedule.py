"""The fleet's queue without Ray: fairness, longest-first, cool-down, re-registration, deadlines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ondevice_farm.controller.queue import JobSpec, Schedule, UnitSlot
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import DeviceUnit, RunRequest


def unit_slot(
    serial: str, node: str = "node-a", profile: str = "pixel8", cooldown_s: float = 0.0
) -> UnitSlot:
    unit = DeviceUnit(profile=profile, serial=serial, platform="android")
    return UnitSlot(unit=unit, actor=f"actor-{serial}", node_id=node, cooldown_s=cooldown_s)


def spec(
    job_id: str, selector: str = "pixel8", expected_s: float | None = None, deadline_s: float = 60
) -> JobSpec:
    profile, _, serial = selector.partition(":")
    request = RunRequest(
        artifact=Path("/nonexistent.onnx"),
        artifact_sha256="0" * 64,
        target=Target.parse("ort/cpu"),
        inputs={"x": np.zeros(1, np.float32)},
    )
    return JobSpec(
        job_id=job_id,
        selector=DeviceSelector(profile, serial or None),
        request=request,
        expected_s=expected_s,
        placement_deadline_s=deadline_s,
    )


def test_submissions_take_turns_so_a_big_one_does_not_starve_a_small_one() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1")])
    schedule.enqueue("nightly", [spec(f"n{i}") for i in range(10)])
    schedule.enqueue("interactive", [spec("i0")])
    order = []
    for _ in range(4):
        ((job, _slot),) = schedule.assign(now=0.0)
        order.append(job.spec.job_id)
        schedule.release(job.spec.job_id, now=0.0)
    assert order == ["n0", "i0", "n1", "n2"]


def test_longest_expected_jobs_start_first() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2")])
    schedule.enqueue(
        "suite", [spec("short", expected_s=1), spec("long", expected_s=9), spec("mid", expected_s=5)]
    )
    assert [job.spec.job_id for job, _ in schedule.assign(now=0.0)] == ["long", "mid"]


def test_a_unit_runs_one_job_at_a_time_and_rests_for_its_cooldown() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1", cooldown_s=30)])
    schedule.enqueue("s", [spec("a"), spec("b")])
    assert [j.spec.job_id for j, _ in schedule.assign(now=0.0)] == ["a"]
    assert schedule.assign(now=1.0) == []
    schedule.release("a", now=10.0)
    assert schedule.assign(now=39.0) == []
    assert schedule.next_wakeup(39.0) == 1.0
    assert [j.spec.job_id for j, _ in schedule.assign(now=40.0)] == ["b"]


def test_a_pinned_job_waits_for_its_unit() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2")])
    schedule.enqueue("s", [spec("pinned", "pixel8:u2"), spec("any")])
    started = {job.spec.job_id: slot.unit.serial for job, slot in schedule.assign(now=0.0)}
    assert started == {"pinned": "u2", "any": "u1"}


def test_a_retried_job_prefers_a_unit_it_has_not_failed_on() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2")])
    schedule.enqueue("s", [spec("a")])
    ((job, slot),) = schedule.assign(now=0.0)
    schedule.release("a", now=0.0)
    job.avoid.add(slot.key)
    schedule.requeue(job)
    ((_, again),) = schedule.assign(now=0.0)
    assert again.key != slot.key


def test_re_registering_a_busy_unit_keeps_it_busy_until_its_job_ends() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1")])
    schedule.enqueue("s", [spec("a"), spec("b")])
    schedule.assign(now=0.0)
    schedule.register("node-a", [unit_slot("u1")])  # the agent's periodic re-discovery
    assert schedule.assign(now=0.0) == []
    schedule.release("a", now=0.0)
    assert [j.spec.job_id for j, _ in schedule.assign(now=0.0)] == ["b"]


def test_units_missing_from_a_registration_or_on_a_dead_node_are_down() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2")])
    schedule.register("node-b", [unit_slot("u3", node="node-b")])
    _, gone = schedule.register("node-a", [unit_slot("u1")])
    assert gone == ["pixel8:u2"]
    assert schedule.mark_node_down("node-b", "died") == ["pixel8:u3"]
    assert {k: s.up for k, s in schedule.units.items()} == {
        "pixel8:u1": True,
        "pixel8:u2": False,
        "pixel8:u3": False,
    }


def test_a_job_no_unit_can_take_waits_until_its_deadline() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1")])
    schedule.enqueue("s", [spec("lost", "iphone15", deadline_s=5), spec("fine")])
    waiting, expired = schedule.unplaceable(now=100.0)
    assert [j.spec.job_id for j in waiting] == ["lost"] and expired == []
    assert schedule.unplaceable(now=104.0) == ([], [])
    waiting, expired = schedule.unplaceable(now=105.0)
    assert waiting == [] and [j.spec.job_id for j in expired] == ["lost"]
    assert [j.spec.job_id for j, _ in schedule.assign(now=105.0)] == ["fine"]
