"""`farm nightly SUITE --follow RUN`: wait for a night the controller runs, then give its verdict.

A night handed to a controller (`--detach`, or a follower that stopped following) runs to its end
without its submitter; the fleet finishes the run in the store (controller/fleet_runs.py). This
reads the store until the run is no longer running, then compares it with the runs before it as
`farm nightly` would have at the night's end.
"""

from __future__ import annotations

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.client import fleet_client
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.results import run_store
from ondevice_farm.errors import SchedulingError, UsageError
from ondevice_farm.nightly.run import (
    NightlyResult,
    StoreReader,
    left_or_cancelled,
    load_history,
    night_verdict,
)
from ondevice_farm.nightly.suite import Suite
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.progress import Progress
from ondevice_farm.run_follow import DEFAULT_FOLLOW_EVERY_S, wait_for_end
from ondevice_farm.store import StoreLocation
from ondevice_farm_agents.base import AgentSettings


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
    cancel_on_stop: bool = False,
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
            row = wait_for_end(store, row, progress.stage, every_s)
        except KeyboardInterrupt:
            left_or_cancelled(client, row.run_id, suite, progress, cancel_on_stop)
            raise
        if row.status == "interrupted":
            raise SchedulingError(
                f"run {row.run_id} was interrupted (cancelled, or its controller stopped) before its end",
                hint="its complete jobs are in the store: `farm show RUN` lists them",
            )
        history = load_history(store, suite.name, baseline, before=row.run_id)
        return night_verdict(store, dict(row.document), row.status, history, suite, read_stored)
