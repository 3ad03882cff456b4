"""`farm agent`: serve this host's devices to the fleet (one `DeviceActor` per unit)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

import click

from ondevice_farm.cli.context import SIMULATED_ENV, CliState, fleet_settings, handles_errors


def log_to_stderr() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("ondevice_farm.controller").setLevel(logging.INFO)
    logging.getLogger("ondevice_farm.api").setLevel(logging.INFO)


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


@click.command()
@click.option("--address", help="Ray head, host:port (default: $RAY_ADDRESS).")
@click.option("--node-ip", help="This host's address in the cluster, where it has several.")
@click.option(
    "--rediscover",
    "rediscover_s",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds between two discoveries of attached units.",
)
@click.option("--adb", multiple=True, help="host:port of an Android unit over TCP (also $FARM_ADB_DEVICES).")
@click.option(
    "--simulated", type=int, help=f"Also serve N simulated units (load tests; also ${SIMULATED_ENV})."
)
@click.pass_obj
@handles_errors
def agent(
    state: CliState,
    address: str | None,
    node_ip: str | None,
    rediscover_s: float,
    adb: tuple[str, ...],
    simulated: int | None,
) -> None:
    """Join the Ray cluster and serve this host's devices to the farm controller until stopped."""
    from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
    from ondevice_farm.controller.node_agent import NodeAgent, NodeAgentConfig, default_platforms, find_fleet
    from ondevice_farm.errors import UsageError

    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise UsageError("farm agent needs the cluster: --address HEAD:PORT (or $RAY_ADDRESS)")
    profiles, settings = fleet_settings(state, adb, simulated)
    log_to_stderr()
    config = NodeAgentConfig(
        platforms=default_platforms(simulated="simulated_units" in settings.extra),
        cache_dir=Path(state.home.root) / "agent-artifacts",
        rediscover_s=rediscover_s,
    )
    with ray_cluster(ClusterConfig(address=address, node_ip_address=node_ip)):
        stop = stop_on_signals()  # after ray.init, which installs handlers of its own
        node = NodeAgent(config, settings, profiles)
        click.echo(f"farm agent on node {node.node_id[:12]}: serving {', '.join(config.platforms)}", err=True)
        try:
            node.serve_forever(stop, find_fleet)
        finally:
            node.close()
