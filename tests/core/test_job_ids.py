"""Job ids are unique within a run at a lab's size, and a submission that names one id twice is
refused instead of losing a job.

Found by benchmarks/lab_scale.py: with 3 random bytes per id, a 10,000-job nightly stored 9,994 jobs
and reported itself complete (each pair of equal ids ran twice and was heard once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ondevice_farm.controller.client import FleetClient
from ondevice_farm.controller.queue import JobSpec
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm.errors import SchedulingError
from ondevice_farm.store import new_job_id, new_run_id
from ondevice_farm.targets import parse_targets
from ondevice_farm_agents.base import RunRequest

#: a night of a real lab: 1,000 phones x 100 models x 3 targets
NIGHT_JOBS = 300_000


def test_a_nights_job_ids_are_all_distinct() -> None:
    run_id = new_run_id()
    ids = {new_job_id(run_id) for _ in range(NIGHT_JOBS)}
    # 3 random bytes gave ~2,700 equal pairs here (n^2 / 2^25); 8 give one in ~400 million nights
    assert len(ids) == NIGHT_JOBS
    assert all(i.startswith(f"{run_id}-") for i in ids)


class NoFleet:
    """A fleet that must not be called: the refusal comes before anything is submitted."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the fleet was called ({name}) for a submission that should be refused")


def test_a_submission_naming_one_job_id_twice_is_refused(tmp_path: Path) -> None:
    (target,) = parse_targets("ort/cpu") or []
    request = RunRequest(
        artifact=tmp_path / "m.onnx", artifact_sha256="0" * 64, target=target, inputs={}, warmup=0, runs=1
    )
    spec = JobSpec(job_id="r-1", selector=DeviceSelector("host-cpu"), request=request)
    other = JobSpec(job_id="r-2", selector=DeviceSelector("host-cpu"), request=request)
    client = FleetClient(fleet=NoFleet(), embedded=True)
    with pytest.raises(SchedulingError, match="1 job id"):
        list(client.run([spec, other, spec]))
