"""A host job is measured at the priority of a user's own process, not at a Ray worker's nice 15."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import farm_json


def test_a_host_job_in_ray_runs_at_the_submitters_priority(
    home: Path, model: Path, ray_session: None
) -> None:
    document = farm_json(home, "submit", str(model), "--runs", "3", "--repeats", "2", "--no-profile")
    (job,) = document["jobs"]
    # the DeviceActor is a Ray worker, which Ray would lower to nice 15; the repeat's own process
    # inherits the actor's priority
    assert job["controls"]["priority"] == f"nice {os.getpriority(os.PRIO_PROCESS, 0)}"
