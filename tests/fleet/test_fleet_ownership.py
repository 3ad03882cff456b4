"""Without Ray: which `farm serve` owns the fleet (fleet_owner.py), and the nights that are the
controller's own (fleet_runs.py): unfollowed they go on, finished by the fleet; `farm cancel`
stops them and tells a follower why."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ondevice_farm.controller.fleet import FleetActorImpl
from ondevice_farm.controller.fleet_events import JobEvent
from ondevice_farm.controller.fleet_owner import FleetOwner
from ondevice_farm.controller.job_context import RunWriting
from ondevice_farm.errors import JobCancelledError, SchedulingError
from ondevice_farm.store import ResultsStore
from tests.fleet.test_schedule import spec


def test_a_fleet_is_adopted_only_from_a_dead_owner_and_only_with_its_store() -> None:
    owner = FleetOwner("/srv/results.sqlite")
    assert owner.claim("job-a", "/srv/results.sqlite", alive=None) is False  # the first owner
    assert owner.claim("job-a", "/srv/results.sqlite", alive=None) is False  # itself again
    assert not owner.needs_liveness("job-a") and owner.needs_liveness("job-b")
    with pytest.raises(SchedulingError, match=r"already running on this cluster \(Ray job job-a\)"):
        owner.claim("job-b", "/srv/results.sqlite", alive={"job-a", "job-b"})
    with pytest.raises(SchedulingError, match="already running"):  # Ray cannot say: not taken
        owner.claim("job-b", "/srv/results.sqlite", alive=None)
    with pytest.raises(SchedulingError, match=r"writes to /srv/results\.sqlite, not /tmp/other\.sqlite"):
        owner.claim("job-b", "/tmp/other.sqlite", alive={"job-b"})
    assert owner.claim("job-b", "/srv/results.sqlite", alive={"job-b"}) is True
    assert owner.job_id == "job-b"


async def night(fleet: FleetActorImpl, store: ResultsStore, run_id: str, jobs: int, *, owned: bool) -> str:
    store.start_run(run_id, "nightly", {"run_id": run_id}, suite="s")
    submission = f"sub-{run_id}"
    specs = [spec(f"{run_id}-{i}", selector="pixel8:nowhere") for i in range(jobs)]
    await fleet.submit(submission, specs, run_id, RunWriting(run_id, {}), None, owned)
    return submission


def stored_job(store: ResultsStore, run_id: str, job_id: str, status: str) -> None:
    store.add_job(
        run_id,
        {"job_id": job_id, "run_id": run_id, "status": status, "device": "pixel8", "target": "ort/cpu",
         "model": {"name": "m", "sha256": "0"}, "finished_at": 1.0},
    )  # fmt: skip


def fleet_with_store(tmp_path: Path) -> tuple[FleetActorImpl, ResultsStore]:
    """A fleet writing to a SQLite store, and that store opened beside it."""
    location = tmp_path / "results.sqlite"
    return FleetActorImpl(store_location=str(location)), ResultsStore(location)


def test_an_unfollowed_night_of_the_controller_goes_on_and_the_fleet_finishes_its_run(tmp_path: Path) -> None:
    fleet, store = fleet_with_store(tmp_path)

    async def scenario() -> None:
        owned = await night(fleet, store, "r1", 2, owned=True)
        other = await night(fleet, store, "r2", 3, owned=False)
        await fleet.unfollow(owned)
        await fleet.unfollow(other)
        # the controller's night keeps its queued jobs; any other submission is cancelled
        assert fleet.schedule.pending() == 2
        assert fleet.runs.owned(owned) and fleet.runs.run_of(other) is None
        # a submitter left behind that polls again hears why, not silence
        with pytest.raises(SchedulingError, match="stopped keeping the events of run r1"):
            await fleet.poll(owned, 0.01)
        for index, status in enumerate(("ok", "failed")):
            stored_job(store, "r1", f"r1-{index}", status)
            fleet._emit(owned, JobEvent(f"r1-{index}", "done" if status == "ok" else "failed"))
        await asyncio.gather(*fleet._tasks)

    asyncio.run(scenario())
    run = store.run("r1")
    assert run.status == "partial" and run.finished_at is not None  # written by the fleet
    assert store.run("r2").status == "running"  # its submitter's to finish or mark


def test_farm_cancel_stops_a_night_marks_it_and_tells_its_follower_why(tmp_path: Path) -> None:
    fleet, store = fleet_with_store(tmp_path)

    async def scenario() -> None:
        submission = await night(fleet, store, "r3", 4, owned=True)
        assert await fleet.cancel_run("r3") == 4
        assert fleet.schedule.pending() == 0
        with pytest.raises(JobCancelledError, match=r"run r3 was cancelled \(`farm cancel`\)"):
            await fleet.poll(submission, 0.01)
        with pytest.raises(SchedulingError, match="run r3 has no jobs on this controller"):
            await fleet.cancel_run("r3")

    asyncio.run(scenario())
    assert store.run("r3").status == "interrupted"
