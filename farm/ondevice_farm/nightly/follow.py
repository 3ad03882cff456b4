"""`farm nightly SUITE --follow RUN`: wait for a night the controller runs, then give its verdict.

A night handed to a controller (`--detach`, or a follower that stopped following) runs to its end
without its submitter; the fleet finishes the run in the store (controller/fleet_runs.py). This
reads the store until the run is no longer running, then compares it with the runs before it as
`farm nightly` would have at the night's end.
"""

from __future__ import annotations

import time

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.client import fleet_client
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.results import RunStore, run_store
from ondevice_farm.errors import SchedulingError, UsageError
from ondevice_farm.nightly.run import (
    NightlyResult,
    StoreReader,
    load_history,
    night_verdict,
    stopped_following,
)
from ondevice_farm.nightly.suite import Suite
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.progress import Progress
from ondevice_farm.store import RunRow, StoreLocation
from ondevice_farm_agents.base import AgentSettings

#: how often the run's state is read from the store while it runs
DEFAULT_FOLLOW_EVERY_S = 2.0
#: a progress line at most this often, while the count of stored jobs grows
DEFAULT_REPORT_EVERY_S = 60.0


def follow_nightly(
    suite: Suite,
    run: str,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    settings: AgentSettings,
    cluster: ClusterConfig,
    progress: Progress,
    baseline: str | None = None,
    store_location: StoreLocation | None = None,
    read_stored: StoreReader | None = None,
    every_s: float = DEFAULT_FOLLOW_EVERY_S,
) -> NightlyResult:
    with (
        fleet_client(cluster, settings, profiles, ()) as client,
        run_store(client.embedded, client.fleet, store_location or home.store_path) as store,
    ):
        row = store.run(store.resolve_run_id(run))
        if row.kind != "nightly" or row.suite != suite.name:
            raise UsageError(
                f"run {row.run_id} is not a night of suite {suite.name!r} (it is {row.kind} {row.suite})"
            )
        try:
            row = wait_for_end(store, row, progress, every_s)
        except KeyboardInterrupt:
            progress.stage(stopped_following(row.run_id, suite))
            raise
        if row.status == "interrupted":
            raise SchedulingError(
                f"run {row.run_id} was interrupted (cancelled, or its controller stopped) before its end",
                hint="its complete jobs are in the store: `farm show RUN` lists them",
            )
        history = load_history(store, suite.name, baseline, before=row.run_id)
        return night_verdict(store, dict(row.document), row.status, history, suite, read_stored)


def wait_for_end(store: RunStore, row: RunRow, progress: Progress, every_s: float) -> RunRow:
    planned = row.document.get("planned_jobs")
    said_at, said = 0.0, -1
    while row.status == "running":
        stored = sum(store.job_counts(row.run_id).values())
        if stored != said and time.monotonic() - said_at >= DEFAULT_REPORT_EVERY_S:
            of = f" of {planned:,}" if isinstance(planned, int) else ""
            progress.stage(f"run {row.run_id}: {stored:,}{of} jobs stored; following it to its end")
            said_at, said = time.monotonic(), stored
        time.sleep(every_s)
        row = store.run(row.run_id)
    return row
