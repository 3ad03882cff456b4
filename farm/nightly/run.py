"""`farm nightly SUITE`: run every model of the suite as one run, then compare with the baseline.

The baseline is the latest complete run of the same suite (or the one asked for), chosen
before this run starts. Its job durations also order this run's queue longest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.base import AgentSettings
from farm.config import FarmHome
from farm.controller.client import fleet_client
from farm.controller.cluster import ClusterConfig
from farm.controller.pipeline import (
    Progress,
    SilentProgress,
    SubmitRequest,
    check_requests,
    plan_model,
    prepare_on,
    run_document,
    run_planned,
)
from farm.controller.recording import recorded_run
from farm.controller.results import RunStore, run_store
from farm.nightly.compare import Comparison, compare_runs, job_key, medians_by_key
from farm.nightly.suite import Suite
from farm.profiles import DeviceProfile
from farm.store import StoreLocation, new_run_id


@dataclass
class NightlyResult:
    run: dict[str, Any]
    comparison: Comparison


def requests_for(suite: Suite) -> list[SubmitRequest]:
    return [
        SubmitRequest(
            model_path=m.path,
            devices=",".join(m.devices),
            targets=None if m.targets is None else list(m.targets),
            runs=m.runs,
            warmup=m.warmup,
            sustained_s=m.sustained_s,
            shapes=dict(m.shapes),
            tolerance=m.tolerance or None,
            reference_model=m.reference,
            max_attempts=suite.attempts,
            placement_deadline_s=suite.placement_deadline_s,
        )
        for m in suite.models
    ]


#: earlier complete runs of the suite whose medians set the run-to-run noise floor
HISTORY_RUNS = 10


def baseline_and_history(
    store: RunStore, suite: str, wanted: str | None
) -> tuple[str | None, list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The baseline run (the one asked for, else the suite's latest complete run) and its jobs,
    and the jobs of the suite's last complete runs, oldest first; each run's jobs read once."""
    complete = [
        r.run_id for r in store.runs(limit=200, kind="nightly", suite=suite) if r.status == "complete"
    ]
    jobs = {run_id: store.jobs(run_id) for run_id in complete[:HISTORY_RUNS]}
    baseline_id = store.resolve_run_id(wanted) if wanted is not None else next(iter(complete), None)
    if baseline_id is not None and baseline_id not in jobs:
        jobs[baseline_id] = store.jobs(baseline_id)
    baseline_jobs = jobs[baseline_id] if baseline_id is not None else []
    return baseline_id, baseline_jobs, [jobs[r] for r in reversed(complete[:HISTORY_RUNS])]


def run_nightly(
    suite: Suite,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    settings: AgentSettings,
    cluster: ClusterConfig,
    baseline: str | None = None,
    progress: Progress | None = None,
    store_location: StoreLocation | None = None,
) -> NightlyResult:
    progress = progress or SilentProgress()
    requests = requests_for(suite)
    checked, platforms = check_requests(requests, profiles, settings)
    with fleet_client(cluster, settings, profiles, platforms) as client:
        prepared = prepare_on(client, requests, checked, profiles)
        home.ensure()
        run_id = new_run_id()
        with run_store(client.embedded, client.fleet, store_location or home.store_path) as store:
            baseline_id, baseline_jobs, earlier = baseline_and_history(store, suite.name, baseline)
            history = medians_by_key(earlier)
            durations = {job_key(j): j["duration_s"] for j in baseline_jobs if j.get("duration_s")}

            def expected(base: dict[str, Any]) -> float | None:
                return durations.get(job_key(base))

            planned = [
                plan_model(r, p, run_id, home=home, client=client, progress=progress, expected_s=expected)
                for r, p in zip(requests, prepared, strict=True)
            ]
            document = {
                "run_id": run_id,
                "kind": "nightly",
                "suite": suite.name,
                "suite_path": str(suite.source) if suite.source else None,
                "baseline_run": baseline_id,
                "models": [
                    run_document(run_id, r, p)["model"] for r, p in zip(requests, prepared, strict=True)
                ],
                "settings": {"attempts": suite.attempts, "placement_deadline_s": suite.placement_deadline_s},
            }
            with recorded_run(store, run_id, "nightly", document, suite=suite.name) as recorder:
                run_planned(planned, client, recorder, progress)
    document.update(status=recorder.status, jobs=recorder.jobs)
    comparison = compare_runs(baseline_id, baseline_jobs, recorder.jobs, suite.policy, history)
    return NightlyResult(run=document, comparison=comparison)
