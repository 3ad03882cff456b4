"""`farm serve`: the controller. The fleet actor (registry and job queue) lives as long as this,
or, if this dies without being stopped, until the next `farm serve` adopts it (fleet_owner.py)."""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any

import click

from ondevice_farm.api.admission import DEFAULT_MAX_COMPILES, DEFAULT_MAX_SUBMISSIONS
from ondevice_farm.api.wire import DEFAULT_API_HOST, DEFAULT_API_PORT
from ondevice_farm.cli.agent import log_to_stderr, stop_on_signals
from ondevice_farm.cli.context import CliState, fleet_settings, handles_errors
from ondevice_farm.cli.gc import policy_from, policy_options
from ondevice_farm.controller.fleet import DEFAULT_SUBMITTER_TIMEOUT_S
from ondevice_farm.controller.fleet_owner import Claim
from ondevice_farm.controller.ray_auth import read_token, submitter_instructions, use_local_token
from ondevice_farm.metrics.budget import DEFAULT_ADHOC_SERIES, ExportLimits
from ondevice_farm.version import farm_version

STATUS_EVERY_S = 60.0


def _start_fleet(node_id: str, submitter_timeout_s: float, store: str) -> tuple[Any, Claim]:
    """The fleet actor: a new one, or the one a controller that died left running (detached, so
    that its nights go on: controller/fleet_owner.py), claimed for this process."""
    import ray

    from ondevice_farm.controller.cluster import RAY_NAMESPACE
    from ondevice_farm.controller.fleet import FLEET_ACTOR_NAME, fleet_actor_class
    from ondevice_farm.controller.node_agent import node_strategy

    fleet = (
        fleet_actor_class()
        .options(
            name=FLEET_ACTOR_NAME,
            namespace=RAY_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            scheduling_strategy=node_strategy(node_id),
        )
        .remote(submitter_timeout_s=submitter_timeout_s, store_location=store)
    )
    # the actor is up, and ours, before agents and submitters look for it
    claim: Claim = ray.get(fleet.claim.remote(ray.get_runtime_context().get_job_id(), store))
    return fleet, claim


def _say_adopted(claim: Claim) -> None:
    if not claim.adopted:
        return
    click.echo(
        f"adopted the fleet a controller that died left running: {claim.runs} run(s), "
        f"{claim.queued_jobs} job(s) queued, {claim.running_jobs} running; they go on",
        err=True,
    )
    if claim.version != farm_version():
        click.echo(
            f"the adopted fleet runs farm {claim.version}, this is {farm_version()}: it keeps its own "
            "code until `farm serve` is stopped (Ctrl-C) and started again",
            err=True,
        )


@click.command()
@click.option(
    "--address",
    help="Ray head, host:port (default: $RAY_ADDRESS; none: an embedded local Ray "
    "that serves this host's own devices).",
)
@click.option(
    "--node-ip",
    "--bind",
    "node_ip",
    help="This host's address in the cluster; embedded, where Ray is reached (default 127.0.0.1: "
    "Ray listens on loopback only; any other address: on every interface, token auth guarding it).",
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Where /metrics listens.")
@click.option("--metrics-port", type=int, help="Serve Prometheus /metrics on this port (0: any free port).")
@click.option(
    "--metrics-adhoc-series",
    "metrics_adhoc_series",
    type=click.IntRange(min=0),
    default=DEFAULT_ADHOC_SERIES,
    show_default=True,
    envvar="FARM_METRICS_ADHOC_SERIES",
    help="/metrics exports every suite model's (model, device, target) results and only this many of "
    "the newest ad-hoc ones (0: suite models only).",
)
@click.option(
    "--api-host",
    default=DEFAULT_API_HOST,
    show_default=True,
    help="Where the submit API (`farm submit --address http://...`) listens.",
)
@click.option(
    "--api-port",
    type=int,
    default=DEFAULT_API_PORT,
    show_default=True,
    help="The submit API's port (0: any free port).",
)
@click.option(
    "--max-submissions",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SUBMISSIONS,
    show_default=True,
    help="Submissions the submit API runs at once; more get 429 and ask again.",
)
@click.option(
    "--max-compiles",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_COMPILES,
    show_default=True,
    help="Submissions compiling (and computing references) at once; the others wait their turn.",
)
@click.option("--simulated", type=int, help="Embedded only: also serve N simulated units (load tests).")
@click.option(
    "--submitter-timeout",
    "submitter_timeout_s",
    type=float,
    default=DEFAULT_SUBMITTER_TIMEOUT_S,
    show_default=True,
    help="Drop the queued jobs of a submitter silent for this many seconds (killed).",
)
@click.option(
    "--gc-every",
    envvar="FARM_GC_EVERY",
    help="Run `farm gc` on this schedule (e.g. 6h, 24h) with the --gc-* policy; default: never.",
)
@policy_options("gc-")
@click.pass_obj
@handles_errors
def serve(
    state: CliState,
    address: str | None,
    node_ip: str | None,
    metrics_host: str,
    metrics_port: int | None,
    metrics_adhoc_series: int,
    api_host: str,
    api_port: int,
    max_submissions: int,
    max_compiles: int,
    simulated: int | None,
    submitter_timeout_s: float,
    gc_every: str | None,
    keep_runs: int,
    keep_days: float,
    max_bytes: str | None,
) -> None:
    """Run the farm controller: the device registry, the job queue, /metrics."""
    import ray

    from ondevice_farm.api.admission import DEFAULT_MAX_CONNECTIONS, ApiLimits, CompileSlots
    from ondevice_farm.api.blobs import BlobStore
    from ondevice_farm.api.local_controller import (
        CONTROLLER_FILE,
        forget_controller,
        new_record,
        reachable_url,
        record_controller,
    )
    from ondevice_farm.api.server import start_api_server
    from ondevice_farm.api.submissions import SubmissionService
    from ondevice_farm.controller.client import FleetStateClient
    from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
    from ondevice_farm.controller.listening import answers_without_token, describe, embedded_ray_listeners
    from ondevice_farm.controller.node_agent import NodeAgent, NodeAgentConfig, default_platforms
    from ondevice_farm.controller.recording import interrupt_orphans
    from ondevice_farm.durations import parse_duration_s
    from ondevice_farm.gc.schedule import DEFAULT_GC_INTERVAL_S, GcSchedule
    from ondevice_farm.store import ResultsStore

    address = address or os.environ.get("RAY_ADDRESS") or None
    # a bad gc setting stops here, before anything starts or is written
    gc_policy = policy_from(keep_runs, keep_days, max_bytes, "gc-")
    gc_every_s = parse_duration_s(gc_every, "--gc-every") if gc_every else DEFAULT_GC_INTERVAL_S
    profiles, settings = fleet_settings(state, (), simulated)
    log_to_stderr()
    home = state.home.ensure()
    location = state.store
    with ResultsStore(location) as store:
        for run_id in interrupt_orphans(store):
            click.echo(
                f"run {run_id} was left running by a controller that died: marked interrupted", err=True
            )
    with ray_cluster(ClusterConfig(address=address, node_ip_address=node_ip)):
        stop = stop_on_signals()  # after ray.init, which installs handlers of its own
        node_id = ray.get_runtime_context().get_node_id()
        fleet, claim = _start_fleet(node_id, submitter_timeout_s, str(location))
        _say_adopted(claim)
        api = start_api_server(
            SubmissionService(
                fleet, home, profiles, settings, BlobStore(home.root / "uploads"), CompileSlots(max_compiles)
            ),
            read_token(use_local_token()),
            api_host,
            api_port,
            ApiLimits(
                max_submissions=max_submissions,
                max_connections=max(DEFAULT_MAX_CONNECTIONS, 2 * max_submissions),
            ),
        )
        threads: list[threading.Thread] = []
        local: NodeAgent | None = None
        if address is None:
            config = NodeAgentConfig(
                platforms=default_platforms("simulated_units" in settings.extra),
                cache_dir=home.root / "agent-artifacts",
            )
            local = NodeAgent(config, settings, profiles)
            threads.append(
                threading.Thread(target=local.serve_forever, args=(stop, lambda: fleet), daemon=True)
            )
        metrics = None
        if metrics_port is not None:
            from ondevice_farm.metrics.disk import DiskUsage
            from ondevice_farm.metrics.server import start_metrics_server
            from ondevice_farm.reports.web import RUNS_PATH, reports_app

            metrics = start_metrics_server(
                location,
                metrics_host,
                metrics_port,
                FleetStateClient(fleet),
                others=reports_app(location, home.artifacts),
                disk=DiskUsage(home),
                limits=ExportLimits(adhoc_series=metrics_adhoc_series),
            )
            click.echo(
                f"metrics on {metrics.url}; run reports on {metrics.url.removesuffix('/metrics')}{RUNS_PATH}",
                err=True,
            )
        for thread in threads:
            thread.start()
        schedule = None
        if gc_every_s > 0:
            log = functools.partial(click.echo, err=True)
            schedule = GcSchedule(home, location, gc_policy, gc_every_s, log).start()
        # a plain `farm submit` with this farm directory finds the API here (nothing secret in it)
        record = home.root / CONTROLLER_FILE
        url = reachable_url(api.host, api.port)
        record_controller(record, new_record(url, location, farm_version(), state.profiles_path))
        where = address or f"embedded Ray at {ray.get_runtime_context().gcs_address}"
        click.echo(f"farm controller serving on {where}; store {store.path}", err=True)
        click.echo(
            f"submit API on {api.url}: a plain `farm submit MODEL` with the farm directory {home.root} "
            f"uses it; from elsewhere `farm submit MODEL --address {api.url}`",
            err=True,
        )
        loopback_only = False
        if address is None:  # where its own Ray listens, as the kernel shows it now
            own = {api.port} | ({metrics.port} if metrics is not None else set())
            listeners = embedded_ray_listeners(own)
            anyone = [item for item in listeners if not item.loopback_only and answers_without_token(item)]
            click.echo(describe(listeners, use_local_token().token_mode, anyone), err=True)
            loopback_only = bool(listeners) and all(item.loopback_only for item in listeners)
        click.echo(
            submitter_instructions(address or ray.get_runtime_context().gcs_address, loopback_only), err=True
        )
        try:
            while not stop.wait(STATUS_EVERY_S):
                snap = FleetStateClient(fleet).snapshot()
                up = sum(1 for d in snap.devices if d.up)
                busy = sum(1 for d in snap.devices if d.busy)
                click.echo(
                    f"{time.strftime('%H:%M:%S')} units up {up}, busy {busy}; "
                    f"jobs queued {snap.queue_jobs}, running {snap.running_jobs}",
                    err=True,
                )
        finally:
            if schedule is not None:
                schedule.stop()
            forget_controller(record, os.getpid())
            api.stop()
            if metrics is not None:
                metrics.stop()
            if local is not None:
                local.close()
            ray.kill(fleet)
