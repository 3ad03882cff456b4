"""`farm diverge RUN`: where in the network each job's numbers leave the host reference."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ondevice_farm.analysis.divergence import DEFAULT_LAYER_BUDGET
from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.cli.layers import layer_request, print_layers
from ondevice_farm.cli.runs import detail_window_options
from ondevice_farm.json_values import json_default


@click.command("diverge")
@click.argument("run_id")
@click.option(
    "--model",
    "model_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The source model, where it is no longer at the path the run recorded.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=2),
    default=DEFAULT_LAYER_BUDGET,
    show_default=True,
    help="Layers captured in one run; past it the search samples them and bisects (log2 more runs).",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the HTML report, with the error-growth plot, here.",
)
@click.option(
    "--predict",
    "predict",
    metavar="TARGETS",
    help="Also predict these targets on the host, e.g. coreml/ane (no job of the run needed).",
)
@click.option(
    "--on-device",
    is_flag=True,
    help="Measure the phone and board jobs on their own devices (ONNX Runtime; CoreML on iPhones, in "
    "place of the host prediction): one more run each, of the model with its intermediate tensors exposed.",
)
@click.option("--adb", multiple=True, help="host:port of an Android unit over TCP (with --on-device).")
@click.option("--address", help="Ray cluster address for --on-device (default: an embedded local Ray).")
@click.option("--json", "as_json", is_flag=True, help="Print the curves as one JSON document on stdout.")
@detail_window_options("Jobs of the run whose layers are measured or predicted")
@click.pass_obj
@handles_errors
def diverge(
    state: CliState,
    run_id: str,
    model_path: Path | None,
    budget: int,
    predict: str | None,
    html_path: Path | None,
    on_device: bool,
    adb: tuple[str, ...],
    address: str | None,
    as_json: bool,
    detail_jobs: int,
    offset: int,
) -> None:
    """Per-layer error against the host reference for each job of RUN, and the first layer out of
    tolerance: measured for host jobs (and with --on-device for phone jobs, CoreML ones included),
    predicted for CoreML and fp16 phone jobs otherwise."""
    from ondevice_farm.cli.runs import open_store
    from ondevice_farm.reports.document import build_report
    from ondevice_farm.run_reader import load_run

    with open_store(state) as store:
        run = load_run(store, run_id, detail_jobs=detail_jobs, offset=offset)
    shown = len(run["jobs"])
    if shown < run["jobs_total"]:  # on stderr: --json's stdout stays one document
        span = f"{offset + 1}-{offset + shown}" if shown else "none"
        click.echo(
            f"jobs {span} of {run['jobs_total']} (by finish time); --offset and --jobs choose others",
            err=True,
        )
    built = build_report(
        run,
        model_path=model_path,
        artifacts_root=state.home.artifacts,
        predict_precision=False,
        layers=layer_request(state, budget, predict),
    )
    if on_device:
        from ondevice_farm.cli.device_layers import measure_on_devices

        measure_on_devices(state, run, built, budget=budget, adb=adb, address=address)
    if html_path is not None:
        from ondevice_farm.reports.html import render_report

        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(render_report(built), encoding="utf-8")
    layers = built.to_dict()["layers"]
    if as_json:
        sys.stdout.write(json.dumps({"run_id": run["run_id"], **layers}, default=json_default) + "\n")
        return
    from ondevice_farm.reports.terminal import stdout_console

    console = stdout_console()
    console.print(f"[bold]run {run['run_id']}[/bold]: where each job leaves the reference")
    print_layers(console, built.layers or [], built.layers_missing)
    if html_path is not None:
        console.print(f"HTML report: {html_path}")
