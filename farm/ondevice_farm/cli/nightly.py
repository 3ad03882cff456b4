"""`farm nightly SUITE.yaml`: one run of a suite, compared with its baseline; exit 1 on regression.

No scheduler of its own: cron or a systemd timer calls it (docs/fleet.md).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from ondevice_farm.cli.context import CliState, fleet_settings, handles_errors
from ondevice_farm.cli.submit import StderrProgress
from ondevice_farm.errors import UsageError
from ondevice_farm.json_values import json_default

if TYPE_CHECKING:
    from ondevice_farm.nightly.run import HandedOver, NightlyResult
    from ondevice_farm.run_reader import RunReader

#: `farm nightly` exits with this when a job regressed against the baseline
EXIT_REGRESSION = 1


@click.command()
@click.argument("suite_path", metavar="SUITE", type=click.Path(path_type=Path))
@click.option(
    "--baseline", help="Compare with this run (id or prefix) instead of the suite's latest complete run."
)
@click.option(
    "--address", help="Ray cluster with `farm serve` (default: $RAY_ADDRESS, else an embedded local Ray)."
)
@click.option("--pushgateway", help="Push the run summary to this Prometheus Pushgateway URL.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the verdict, job by job with its numbers, as a self-contained HTML page.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run, every job whole (written as each is read) and the comparison as one JSON document.",
)
@click.option(
    "--detach",
    is_flag=True,
    help="With --address: hand the night to the controller and return at once (it runs to its end "
    "without this command; --follow RUN gives its verdict).",
)
@click.option(
    "--follow",
    "follow_run",
    metavar="RUN",
    help="With --address: wait for the suite's night RUN (id or prefix) to end, then give its verdict.",
)
@click.option(
    "--cancel-on-stop",
    is_flag=True,
    help="With --address: Ctrl-C or SIGTERM (a service manager's stop or timeout) cancels the night "
    "in the controller instead of leaving it running there.",
)
@click.option(
    "--allow-simulated",
    is_flag=True,
    help="Run the suite on simulated units too (a simulated lab; their figures are synthetic).",
)
@click.pass_obj
@handles_errors
def nightly(
    state: CliState,
    suite_path: Path,
    baseline: str | None,
    address: str | None,
    pushgateway: str | None,
    html_path: Path | None,
    as_json: bool,
    detach: bool,
    follow_run: str | None,
    cancel_on_stop: bool,
    allow_simulated: bool,
) -> None:
    """Run the suite SUITE (YAML: models x devices x targets) and report regressions.

    With --address the night is the controller's: Ctrl-C stops following it, not the night
    (`farm cancel RUN` stops it)."""
    from ondevice_farm.controller.cluster import ClusterConfig
    from ondevice_farm.nightly.report import print_summary
    from ondevice_farm.nightly.run import HandedOver, run_nightly
    from ondevice_farm.nightly.suite import load_suite, refuse_simulated
    from ondevice_farm_agents.simulated.agent import PROFILE
    from ondevice_farm_agents.simulated.profile import is_simulated

    if html_path is not None and not html_path.parent.is_dir():
        raise UsageError(f"--html {html_path}: no folder {html_path.parent}")
    address = address or os.environ.get("RAY_ADDRESS") or None
    if detach and follow_run:
        raise UsageError("--detach and --follow: give one (--detach starts a night, --follow waits for one)")
    if (detach or follow_run) and address is None:
        option = "--detach" if detach else "--follow"
        raise UsageError(
            f"{option} needs a controller (--address or $RAY_ADDRESS): an embedded night ends with "
            "its command"
        )
    if detach and cancel_on_stop:
        raise UsageError("--detach and --cancel-on-stop: a detached night has no follower to stop")
    if detach and (html_path is not None or pushgateway):
        raise UsageError("--detach gives no verdict to write or push: give --html/--pushgateway to --follow")
    suite = load_suite(suite_path)
    profiles, settings = fleet_settings(state)
    simulated = {PROFILE} | {name for name, p in profiles.items() if is_simulated(p)}
    refuse_simulated(suite, simulated, allow_simulated)
    # bound now: while Ray runs, `sys.stdout` is stderr (controller/cluster.py), and the one JSON
    # document is written before Ray is let go
    stdout = sys.stdout
    read_stored = (lambda store, done: write_nightly_json(store, done, stdout)) if as_json else None
    cluster = ClusterConfig(address=address)
    if follow_run is not None:
        from ondevice_farm.nightly.follow import follow_nightly

        result = follow_nightly(
            suite,
            follow_run,
            home=state.home,
            profiles=profiles,
            settings=settings,
            cluster=cluster,
            progress=StderrProgress(),
            baseline=baseline,
            store_location=state.store,
            read_stored=read_stored,
            cancel_on_stop=cancel_on_stop,
        )
    else:
        night = run_nightly(
            suite,
            home=state.home,
            profiles=profiles,
            settings=settings,
            cluster=cluster,
            baseline=baseline,
            progress=StderrProgress(),
            store_location=state.store,
            read_stored=read_stored,
            detach=detach,
            cancel_on_stop=cancel_on_stop,
        )
        if isinstance(night, HandedOver):
            say_handed_over(night, suite_path, as_json, stdout)
            return
        result = night
    if pushgateway:
        from ondevice_farm.metrics.pushgateway import push_run_summary

        push_run_summary(pushgateway, result.run, result.tally)
    if html_path is not None:
        from ondevice_farm.nightly.html import render_nightly

        html_path.write_text(render_nightly(result.run, result.comparison))
    if not as_json:
        print_summary(result)
    if result.comparison.regressions or result.run["status"] == "failed":
        sys.exit(EXIT_REGRESSION)


def say_handed_over(night: HandedOver, suite_path: Path, as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(
            json.dumps({"run_id": night.run_id, "status": "running", "planned_jobs": night.planned_jobs})
            + "\n"
        )
    click.echo(
        f"run {night.run_id}: {night.planned_jobs:,} job(s) handed to the controller, which runs them to the "
        f"end; `farm nightly {suite_path} --follow {night.run_id}` gives the verdict, "
        f"`farm cancel {night.run_id}` stops it",
        err=True,
    )


def write_nightly_json(store: RunReader, result: NightlyResult, out: TextIO) -> None:
    """The run as one JSON document: its jobs whole, as the run schema has them, but read from the
    store and written one at a time (memory holds one job, whatever the night's size), then the
    comparison."""
    from ondevice_farm.run_reader import iter_whole_jobs

    opening = json.dumps({**result.run, "jobs": []}, default=json_default)
    out.write(opening[: -len("[]}")] + "[")
    for index, job in enumerate(iter_whole_jobs(store, str(result.run["run_id"]))):
        out.write(("," if index else "") + json.dumps(job, default=json_default))
    comparison = json.dumps({"comparison": result.comparison.to_dict()}, default=json_default)
    out.write("]," + comparison[1:] + "\n")
