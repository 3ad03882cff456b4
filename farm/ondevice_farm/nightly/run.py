"""`farm nightly SUITE`: run every model of the suite as one run, then compare with the baseline.

Each job's baseline is the last run of the suite in which that job succeeded (or the run asked
for), chosen before this run starts, with the job's earlier successes as its history. A job whose
artifact changed since then also runs its last good artifact beside it (farm/ondevice_farm/nightly/paired.py).
The baselines' durations also order this run's queue longest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.client import FleetClient, cancel_run, fleet_client
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.pipeline import (
    check_requests,
    plan_model,
    planned_artifacts,
    prepare_on,
    run_planned,
)
from ondevice_farm.controller.recording import recorded_run
from ondevice_farm.controller.results import RunStore, run_store
from ondevice_farm.controller.submission import run_document, with_home_caches
from ondevice_farm.controller.submit_request import SubmitRequest
from ondevice_farm.gc.leases import LeaseBook
from ondevice_farm.nightly.compare import Comparison, Key, Series, compare_runs, job_key
from ondevice_farm.nightly.paired import attach_baselines
from ondevice_farm.nightly.suite import Suite
from ondevice_farm.nightly.verdict_inputs import history_point, verdict_view
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.progress import Progress, SilentProgress
from ondevice_farm.run_reader import RunReader, iter_job_summaries
from ondevice_farm.run_tally import RunTally
from ondevice_farm.store import StoreLocation, new_run_id
from ondevice_farm_agents.base import AgentSettings


@dataclass(frozen=True)
class HandedOver:
    """`farm nightly --detach`: the night is the controller's now, running without this command."""

    run_id: str
    planned_jobs: int


@dataclass
class NightlyResult:
    #: the run's document without its jobs (its `job_counts`: how many, how many ok, by status):
    #: they stay in the store, read one at a time by what shows them (`StoreReader`)
    run: dict[str, Any]
    comparison: Comparison
    #: tonight in counts: what the headline and the Pushgateway summary say
    tally: RunTally


#: called with the run's store still open and the result, before the store is let go: what reads
#: tonight's jobs whole (`farm nightly --json`) streams them from it one at a time
StoreReader = Callable[[RunReader, NightlyResult], None]


def requests_for(suite: Suite) -> list[SubmitRequest]:
    return [
        SubmitRequest(
            model_path=m.path,
            devices=",".join(m.devices),
            targets=None if m.targets is None else list(m.targets),
            runs=m.runs,
            warmup=m.warmup,
            sustained_s=m.sustained_s,
            repeats=m.repeats,
            shapes=dict(m.shapes),
            tolerance=m.tolerance or None,
            reference_model=m.reference,
            max_attempts=suite.attempts,
            placement_deadline_s=suite.placement_deadline_s,
            units_interchangeable=suite.units_interchangeable,
            generate=m.generate,
        )
        for m in suite.models
    ]


#: a job's earlier successful runs used as its history (the run-to-run drift of the series)
HISTORY_RUNS = 10
#: the suite's most recent finished runs read to find them: a few more than the history, so a job
#: that failed on some nights still has most of its history (each run's job summaries are read)
RUNS_READ = HISTORY_RUNS + 5
#: run states whose jobs count as history: finished, whatever some of their jobs did
FINISHED = ("complete", "partial", "failed")


@dataclass
class History:
    """What this run is compared with: per job its earlier successful runs (its baseline last),
    the suite's last finished run, and the baseline run asked for, if any."""

    series: dict[Key, Series]
    previous: list[dict[str, Any]]
    pinned_run: str | None = None
    pinned_jobs: list[dict[str, Any]] | None = None


def load_history(store: RunStore, suite: str, wanted: str | None, before: str | None = None) -> History:
    """A failed job does not make its run unusable: each job's baseline is the last run in which
    it succeeded. With `wanted`, every job is compared with that run (its history: older runs).
    `before`: a run already stored (one followed to its end): only the runs older than it count."""
    listed = store.runs(limit=RUNS_READ + (1 if before else 0), kind="nightly", suite=suite)
    if before is not None:
        ids = [r.run_id for r in listed]
        listed = listed[ids.index(before) + 1 :] if before in ids else listed
    finished = [r.run_id for r in listed if r.status in FINISHED]
    pinned_run = store.resolve_run_id(wanted) if wanted is not None else None
    if pinned_run is not None:
        finished = finished[finished.index(pinned_run) + 1 :] if pinned_run in finished else finished
    # job summaries, a page at a time (the verdicts' inputs are all in the summary); kept of each
    # job: its baseline as its verdicts read it, older nights as session p50s
    # (nightly/verdict_inputs.py). Kept whole, ~40 kB a parsed summary would make ten nights of a
    # 30,000-job suite 12 GB.
    series: dict[Key, Series] = {}
    previous: list[dict[str, Any]] = []
    for run_id in reversed(finished):  # oldest first
        previous = []
        for job in iter_job_summaries(store, run_id):
            if job["status"] != "ok":
                previous.append(history_point(job))
                continue
            view = verdict_view(job)
            previous.append(view)
            runs = series.setdefault(job_key(job), [])
            if runs:  # no longer the baseline
                runs[-1] = (runs[-1][0], history_point(runs[-1][1]))
            runs.append((run_id, view))
            del runs[:-HISTORY_RUNS]
    pinned_jobs = None
    if pinned_run is not None:
        pinned_jobs = [verdict_view(job) for job in iter_job_summaries(store, pinned_run)]
    return History(series, previous if pinned_run is None else pinned_jobs or [], pinned_run, pinned_jobs)


def tallied(jobs: Iterable[dict[str, Any]], tally: RunTally) -> Iterator[dict[str, Any]]:
    """The jobs as they come, each counted on its way past."""
    for job in jobs:
        tally.add(job)
        yield job


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
    read_stored: StoreReader | None = None,
    detach: bool = False,
    cancel_on_stop: bool = False,
) -> NightlyResult | HandedOver:
    """One night. With a controller (`cluster.address`) the night is the controller's: if this
    stops following it (Ctrl-C, SIGTERM), it goes on, or with `cancel_on_stop` is cancelled
    there; `detach`: handed over, not followed at all."""
    progress = progress or SilentProgress()
    requests = [with_home_caches(r, home) for r in requests_for(suite)]
    checked, platforms = check_requests(requests, profiles, settings)
    with fleet_client(cluster, settings, profiles, platforms) as client:
        prepared = prepare_on(client, requests, checked, profiles)
        home.ensure()
        run_id = new_run_id()
        with (
            ExitStack() as stack,
            run_store(client.embedded, client.fleet, store_location or home.store_path) as store,
        ):
            history = load_history(store, suite.name, baseline)
            durations = {
                key: runs[-1][1]["duration_s"]
                for key, runs in history.series.items()
                if runs[-1][1].get("duration_s")
            }

            def expected(base: dict[str, Any]) -> float | None:
                return durations.get(job_key(base))

            # `farm gc` leaves tonight's artifacts and the baselines' alone until the jobs are stored
            lease = stack.enter_context(LeaseBook(home.root).lease())
            with lease.placing():
                planned = [
                    plan_model(r, p, run_id, home=home, client=client, progress=progress, expected_s=expected)
                    for r, p in zip(requests, prepared, strict=True)
                ]
                paired = attach_baselines(
                    planned, history.series, ArtifactStore(home.artifacts), client, suite.policy
                )
                baselines = {
                    s.request.paired.baseline.artifact_sha256
                    for p in planned
                    for s in p.specs
                    if s.request.paired
                }
                lease.hold_artifacts(home.artifacts, planned_artifacts(planned) | baselines)
            if paired:
                progress.stage(f"{paired} changed job(s) run beside their last good artifact, interleaved")
            planned_jobs = sum(len(p.specs) + len(p.failed) for p in planned)
            document = {
                "run_id": run_id,
                "kind": "nightly",
                "suite": suite.name,
                "suite_path": str(suite.source) if suite.source else None,
                "baseline_run": history.pinned_run
                or (history.previous[0]["run_id"] if history.previous else None),
                "models": [
                    run_document(run_id, r, p)["model"] for r, p in zip(requests, prepared, strict=True)
                ],
                "settings": {"attempts": suite.attempts, "placement_deadline_s": suite.placement_deadline_s},
                "planned_jobs": planned_jobs,
            }
            owned = not client.embedded
            with recorded_run(store, run_id, "nightly", document, suite=suite.name) as recorder:
                try:
                    run_planned(planned, client, recorder, progress, owned=owned, detach=detach)
                except KeyboardInterrupt:
                    if recorder.handed_over:
                        left_or_cancelled(client, run_id, suite, progress, cancel_on_stop)
                    raise
            if recorder.detached:
                return HandedOver(run_id, planned_jobs)
            result = night_verdict(store, document, recorder.status, history, suite, read_stored)
    return result


def left_or_cancelled(
    client: FleetClient, run_id: str, suite: Suite, progress: Progress, cancel: bool
) -> None:
    """A follower stopped (Ctrl-C, SIGTERM): the night goes on in the controller, or, asked to
    (`--cancel-on-stop`: a service manager's stop or timeout means the night must end), is
    cancelled there as `farm cancel RUN` would."""
    if not cancel:
        progress.stage(stopped_following(run_id, suite))
        return
    _, left = cancel_run(client.fleet, run_id)
    progress.stage(
        f"cancelled run {run_id} in the controller: {left} job(s) dropped or stopped on their units; "
        "its complete jobs stay in the store"
    )


def stopped_following(run_id: str, suite: Suite) -> str:
    where = f" {suite.source}" if suite.source else ""
    return (
        f"stopped following run {run_id}: it goes on in the controller (`farm cancel {run_id}` stops it; "
        f"`farm nightly{where} --follow {run_id}` follows it again)"
    )


def night_verdict(
    store: RunStore,
    document: dict[str, Any],
    status: str,
    history: History,
    suite: Suite,
    read_stored: StoreReader | None,
) -> NightlyResult:
    """Tonight against its history. The fleet wrote each job as it finished: tonight is compared
    from its job summaries, read a page at a time and let go (the verdicts' inputs are all in the
    summary, docs/results.md); what is kept of tonight is the comparison and a tally."""
    tally = RunTally()
    comparison = compare_runs(
        tallied(iter_job_summaries(store, str(document["run_id"])), tally),
        history.series,
        suite.policy,
        previous=history.previous,
        pinned_run=history.pinned_run,
        pinned_jobs=history.pinned_jobs,
    )
    document.update(status=status, job_counts=tally.counts())
    result = NightlyResult(run=document, comparison=comparison, tally=tally)
    if read_stored is not None:
        read_stored(store, result)
    return result
