"""The fleet's queue without Ray: fairness, longest-first, cool-down, re-registration, deadlines,
lost units and dead actors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ondevice_farm.controller.queue import JobSpec, Placement, QueuedJob, Schedule, UnitSlot
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import DeviceUnit, RunRequest


def unit_slot(
    serial: str, node: str = "node-a", profile: str = "pixel8", cooldown_s: float = 0.0
) -> UnitSlot:
    unit = DeviceUnit(profile=profile, serial=serial, platform="android")
    return UnitSlot(unit=unit, actor=f"actor-{serial}", node_id=node, cooldown_s=cooldown_s)


def spec(
    job_id: str,
    selector: str = "pixel8",
    expected_s: float | None = None,
    deadline_s: float = 60,
    unit_down_s: float = 45,
    movable: bool = False,
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
        unit_down_deadline_s=unit_down_s,
        movable=movable,
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
    assert schedule.register("node-a", [unit_slot("u1")]).gone == ["pixel8:u2"]
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
    first = schedule.unplaceable(now=100.0)
    assert [j.spec.job_id for j in first.waiting] == ["lost"] and first.expired == []
    assert schedule.unplaceable(now=104.0) == Placement()
    last = schedule.unplaceable(now=105.0)
    assert last.waiting == [] and [u.job.spec.job_id for u in last.expired] == ["lost"]
    assert last.expired[0].message == "no unit of iphone15 came up within 5s" and not last.expired[0].lost
    assert [j.spec.job_id for j, _ in schedule.assign(now=105.0)] == ["fine"]
    assert schedule.pending() == 0


def test_jobs_pinned_to_a_unit_that_went_down_fail_soon_with_its_reason() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2")])
    schedule.enqueue("s", [spec("p1", "pixel8:u2", deadline_s=600, unit_down_s=45), spec("p2", "pixel8:u2")])
    schedule.mark_node_down("node-a", "its Ray node died")
    schedule.register("node-b", [unit_slot("u1", node="node-b")])  # u1 came back elsewhere, u2 did not
    assert [j.spec.job_id for j in schedule.unplaceable(now=0.0).waiting] == ["p1", "p2"]
    assert schedule.unplaceable(now=44.0) == Placement()
    expired = schedule.unplaceable(now=45.0).expired
    assert [u.job.spec.job_id for u in expired] == ["p1", "p2"]
    assert all(u.lost for u in expired)
    assert expired[0].message == "unit pixel8:u2 is lost (its Ray node died); it did not come back within 45s"
    assert schedule.pending() == 0 and schedule.queues == {}


def test_a_movable_pinned_job_of_a_lost_unit_runs_on_another_unit_of_its_profile() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2")])
    schedule.enqueue("s", [spec("fixed", "pixel8:u2"), spec("movable", "pixel8:u2", movable=True)])
    schedule.mark_down("pixel8:u2", "no longer attached")
    schedule.unplaceable(now=0.0)
    # the movable job does not wait for its unit: its suite said any unit of the profile will do
    placement = schedule.unplaceable(now=1.0)
    assert placement.expired == [] and [u.job.spec.job_id for u in placement.moved] == ["movable"]
    assert (
        placement.moved[0].message
        == "unit pixel8:u2 is lost (no longer attached): moved to any unit of pixel8"
    )
    ((job, slot),) = schedule.assign(now=1.0)
    assert (job.spec.job_id, slot.key) == ("movable", "pixel8:u1")
    assert schedule.unplaceable(now=44.0) == Placement()
    assert [u.job.spec.job_id for u in schedule.unplaceable(now=45.0).expired] == ["fixed"]


def test_a_job_joining_a_waiting_line_gets_its_own_full_wait() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1")])
    schedule.enqueue("s", [spec("early", "iphone15", deadline_s=10)])
    schedule.unplaceable(now=0.0)
    retried = QueuedJob(spec=spec("late", "iphone15", deadline_s=10), submission="s", queued_at=0.0)
    schedule.requeue(retried, now=8.0)
    assert [j.spec.job_id for j in schedule.unplaceable(now=9.0).waiting] == ["late"]
    assert [u.job.spec.job_id for u in schedule.unplaceable(now=10.0).expired] == ["early"]
    assert schedule.unplaceable(now=17.0).expired == []
    assert [u.job.spec.job_id for u in schedule.unplaceable(now=18.0).expired] == ["late"]


def test_a_unit_whose_actor_died_stays_down_until_a_new_actor_registers() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1")])
    schedule.mark_down("pixel8:u1", "the unit's actor or node died", actor_dead=True)
    again = schedule.register("node-a", [unit_slot("u1")])  # the agent's periodic re-registration
    assert again.dead == ["pixel8:u1"] and again.added == []
    schedule.enqueue("s", [spec("a")])
    assert schedule.assign(now=0.0) == []
    fresh = unit_slot("u1")
    fresh.actor = "actor-u1-second"
    assert schedule.register("node-a", [fresh]).added == ["pixel8:u1"]
    assert [j.spec.job_id for j, _ in schedule.assign(now=0.0)] == ["a"]


def test_a_retried_job_goes_before_the_queued_ones_and_pending_counts_every_line() -> None:
    schedule = Schedule()
    schedule.register("node-a", [unit_slot("u1"), unit_slot("u2", profile="iphone15")])
    schedule.enqueue("s", [spec("a", expected_s=3), spec("b", expected_s=2), spec("i", "iphone15:u2")])
    assert schedule.pending() == 3
    ((job, _), (other, _)) = schedule.assign(now=0.0)
    assert {job.spec.job_id, other.spec.job_id} == {"a", "i"}
    schedule.release("a", now=0.0)
    schedule.requeue(job)
    assert schedule.pending() == 2
    ((again, _),) = schedule.assign(now=0.0)
    assert again.spec.job_id == "a"


def test_a_submission_past_the_fleets_queue_limit_is_refused_in_one_line() -> None:
    import asyncio

    import pytest

    from ondevice_farm.controller.fleet import FleetActorImpl
    from ondevice_farm.errors import SchedulingError

    fleet = FleetActorImpl(max_queued_jobs=3)
    with pytest.raises(
        SchedulingError, match=r"a submission of 4 jobs: this controller queues at most 3 at once"
    ):
        asyncio.run(fleet.submit("s", [spec(f"j{i}") for i in range(4)]))
    assert fleet.schedule.pending() == 0
