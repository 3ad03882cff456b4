"""Results stream: a job is written to the store by the fleet as it finishes, and neither the
submitter nor the fleet holds more than a bounded number of job documents or unit results,
however many jobs the submission has (a count of live objects, not a timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet.conftest import only_loopback

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
JOBS = 240
UNITS = 4
#: what the submitter may hold at once: a few in passing, never a growing share of the run
SUBMITTER_BOUND = 4

#: one submission of JOBS jobs on UNITS simulated units through the embedded fleet, the way
#: `farm submit` runs it (plan, record, run); prints what each process held at most
SUBMISSION = """
import dataclasses, json, sys
from pathlib import Path

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.client import fleet_client
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.pipeline import check_requests, plan_model, prepare_on, run_planned
from ondevice_farm.controller.recording import recorded_run
from ondevice_farm.controller.results import run_store
from ondevice_farm.controller.submission import with_home_caches
from ondevice_farm.controller.submit_request import SubmitRequest
from ondevice_farm.profiles import load_profiles
from ondevice_farm.store import ResultsStore, new_run_id
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.simulated.profile import with_simulated
from tests.fleet.held_objects import CountingProgress

model, root, jobs, units = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
home = FarmHome(root)
home.ensure()
profiles = with_simulated(load_profiles())
extra = {"simulated_units": units, "simulated_prefix": "sim", "simulated_latency_ms": "0.2"}
settings = AgentSettings(profiles=profiles, extra=extra)


request = with_home_caches(SubmitRequest(model_path=model, devices="simulated", runs=5, warmup=0), home)
checked, platforms = check_requests([request], profiles, settings)
progress = CountingProgress(every=20)
with fleet_client(ClusterConfig(), settings, profiles, platforms) as client:
    [prepared] = prepare_on(client, [request], checked, profiles)
    prepared = dataclasses.replace(prepared, plan=prepared.plan * jobs)
    run_id = new_run_id()
    planned = plan_model(request, prepared, run_id, home=home, client=client, progress=progress)
    with run_store(client.embedded, client.fleet, home.store_path) as store:
        with recorded_run(store, run_id, "submit", {"run_id": run_id, "kind": "submit"}) as recorder:
            run_planned([planned], client, recorder, progress)
    import ray

    try:
        fleet = ray.get(client.fleet.held_results.remote())
    except Exception:  # a fleet without the count
        fleet = None
with ResultsStore(home.store_path) as results:
    counts = results.job_counts(run_id)
print("RESULT " + json.dumps(
    {"finished": progress.done, "status": recorder.status, "stored": counts, "submitter": progress.peak,
     "fleet": fleet}
))
"""


def test_a_submission_of_hundreds_of_jobs_is_held_nowhere_whole(tmp_path: Path) -> None:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FARM_SIMULATED_DEVICES")}
    done = subprocess.run(
        [sys.executable, "-c", SUBMISSION, str(ROOT / "examples" / "tinynet.onnx"), str(tmp_path / "home"),
         str(JOBS), str(UNITS)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])

    # every job ran, and is in the store once
    assert result["finished"] == JOBS and result["status"] == "complete"
    assert sum(result["stored"].values()) == JOBS and result["stored"].get("ok") == JOBS
    # the submitter never saw a unit's result, and held a bounded few documents (the old path
    # kept every job of the run: JOBS of each)
    assert result["submitter"]["runs"] <= SUBMITTER_BOUND, result
    assert result["submitter"]["documents"] <= SUBMITTER_BOUND, result
    # the fleet held at most a result per unit plus those being written
    assert result["fleet"] is not None, "the fleet does not count what it holds"
    fleet = result["fleet"]
    assert 1 <= fleet["peak_results"] <= UNITS + fleet["max_in_flight"] < JOBS // 10, result
