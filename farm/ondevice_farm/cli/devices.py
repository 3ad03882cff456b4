"""`farm devices`: the profiles this farm knows, and the units attached to this host now."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.errors import FarmError
from ondevice_farm.reports.terminal import stdout_console


def _discover(state: CliState, adb: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """Discovery runs in this process: listing units needs no Ray."""
    from ondevice_farm_agents.registry import AGENTS, agent_class

    profiles = state.profiles()
    settings = state.agent_settings(profiles, adb)
    units: list[dict[str, Any]] = []
    problems: list[str] = []
    for platform in AGENTS:
        try:
            agent = agent_class(platform)(settings)
            try:
                found = agent.discover()
                problems.extend(agent.absences())
            finally:
                agent.close()
        except FarmError as exc:
            problems.append(f"{platform}: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
            continue
        for unit in found:
            units.append(
                {
                    "profile": unit.profile,
                    "serial": unit.serial,
                    "platform": unit.platform,
                    "properties": unit.properties,
                }
            )
    return units, problems


def _fleet_units(state: CliState, address: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every unit the controller at `address` knows, on every host, with whether it is up and busy."""
    from ondevice_farm.controller.client import fleet_client
    from ondevice_farm.controller.cluster import ClusterConfig

    profiles = state.profiles()
    with fleet_client(ClusterConfig(address=address), state.agent_settings(profiles), profiles, ()) as client:
        entries = client.units()
    units = [
        {
            "profile": e["unit"].profile,
            "serial": e["unit"].serial,
            "platform": e["unit"].platform,
            "properties": e["unit"].properties,
            "up": e["up"],
            "busy": e["busy"],
            "node_id": e["node_id"],
        }
        for e in entries
    ]
    problems = [
        f"{e['unit'].name}: down ({e['reason'] or 'no reason given'})" for e in entries if not e["up"]
    ]
    return units, problems


@click.command()
@click.option("--adb", multiple=True, help="host:port of an Android unit over TCP (also $FARM_ADB_DEVICES).")
@click.option("--address", help="List the units of the farm controller on this Ray cluster, on every host.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_obj
@handles_errors
def devices(state: CliState, adb: tuple[str, ...], address: str | None, as_json: bool) -> None:
    """List device profiles and the units discovered now (on this host, or with --address the fleet's)."""
    profiles = state.profiles()
    units, problems = _fleet_units(state, address) if address else _discover(state, adb)
    if as_json:
        document = {
            "profiles": [
                {
                    "name": p.name,
                    "display_name": p.display_name,
                    "platform": p.platform,
                    "soc": p.soc,
                    "accelerators": list(p.accelerators),
                    "targets": [t.name for t in p.targets],
                    "on_request": [t.name for t in p.on_request],
                    "attached": sum(1 for u in units if u["profile"] == p.name and u.get("up", True)),
                }
                for p in profiles.values()
            ],
            "units": units,
            "problems": problems,
        }
        sys.stdout.write(json.dumps(document) + "\n")
        return
    console = stdout_console()
    table = Table(title="Device profiles", title_justify="left")
    for column in ("profile", "platform", "SoC", "targets", "attached"):
        table.add_column(column)
    for p in profiles.values():
        attached = [u["serial"] for u in units if u["profile"] == p.name and u.get("up", True)]
        table.add_row(
            p.name,
            p.platform,
            p.soc,
            ", ".join(t.name for t in p.targets)
            + (
                f" [dim](with -t only: {', '.join(t.name for t in p.on_request)})[/dim]"
                if p.on_request
                else ""
            ),
            ", ".join(attached) if attached else "[dim]none[/dim]",
        )
    console.print(table)
    unknown = [u for u in units if u["profile"] not in profiles]
    for unit in unknown:
        console.print(
            f"[yellow]unit {unit['serial']} ({unit['platform']}) matches no profile[/yellow]: "
            + escape(unit["properties"].get("hint", "write one in device_profiles/"))
        )
    for problem in problems:
        console.print(f"[dim]{escape(problem)}[/dim]")
