"""`farm cancel RUN --address HEAD` (or `http://HOST:PORT`, the submit API): stop a run the
controller is running (a night it owns, or any submission's run): its queued jobs dropped, its
running ones stopped on their units, the run marked `interrupted` with its complete jobs kept."""

from __future__ import annotations

import os

import click

from ondevice_farm.api.wire import is_api_address
from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.errors import UsageError


@click.command()
@click.argument("run")
@click.option(
    "--address",
    help="The controller: its Ray address HOST:PORT or its submit API http://HOST:PORT "
    "(default: $RAY_ADDRESS; required).",
)
@click.pass_obj
@handles_errors
def cancel(state: CliState, run: str, address: str | None) -> None:
    """Cancel the running run RUN (id or prefix) on the controller."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        raise UsageError(
            "farm cancel needs the controller's address (--address or $RAY_ADDRESS)",
            hint="an embedded run is stopped with Ctrl-C in its own terminal",
        )
    if is_api_address(address):
        from ondevice_farm.api.client import target_for
        from ondevice_farm.api.store_client import cancel_over_api

        run_id, left = cancel_over_api(target_for(address), run)
    else:
        from ondevice_farm.controller.client import cancel_run
        from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
        from ondevice_farm.controller.node_agent import find_fleet

        with ray_cluster(ClusterConfig(address=address)):
            run_id, left = cancel_run(find_fleet(), run)
    click.echo(
        f"run {run_id} cancelled: {left} job(s) dropped or stopped on their units; its complete jobs "
        "stay in the store, the run reads `interrupted`",
        err=True,
    )
