"""`farm report RUN`: one run (or two) side by side, as terminal findings, JSON, HTML or traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ondevice_farm.analysis.divergence import DEFAULT_LAYER_BUDGET
from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.cli.layers import layer_request, print_layers
from ondevice_farm.cli.runs import ADDRESS_HELP, detail_window_options
from ondevice_farm.json_values import json_default
from ondevice_farm.reports.job_groups import groups_table, window_note


@click.command("report")
@click.argument("run_id")
@click.option("--against", "against_id", metavar="RUN2", help="A second run to compare with, side by side.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the self-contained HTML report here.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report as one JSON document on stdout (the jobs shown in detail, and the "
    "table per model and target of every job).",
)
@click.option(
    "--trace",
    "trace_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write a Chrome/Perfetto trace per job (and run.trace.json) into this directory.",
)
@click.option(
    "--model",
    "model_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The source model, where it is no longer at the path the run recorded (for op alignment).",
)
@click.option(
    "--layers",
    is_flag=True,
    help="Also compute each job's per-layer error curve against the reference (see `farm diverge`).",
)
@click.option(
    "--layers-budget",
    type=click.IntRange(min=2),
    default=DEFAULT_LAYER_BUDGET,
    show_default=True,
    help="Layers captured in one run; past it the search samples and bisects.",
)
@click.option(
    "--predict",
    "predict",
    metavar="TARGETS",
    help="With --layers, also predict these targets on the host, e.g. coreml/ane (no job of the run needed).",
)
@detail_window_options("Jobs of a run shown in detail (columns, op tables, traces)")
@click.option("--address", help=ADDRESS_HELP)
@click.pass_obj
@handles_errors
def report(
    state: CliState,
    run_id: str,
    against_id: str | None,
    html_path: Path | None,
    as_json: bool,
    trace_dir: Path | None,
    model_path: Path | None,
    layers: bool,
    layers_budget: int,
    predict: str | None,
    detail_jobs: int,
    offset: int,
    address: str | None,
) -> None:
    """Why the same model differs across devices and targets: findings, tables, plots, traces."""
    from ondevice_farm.cli.runs import open_store
    from ondevice_farm.reports.document import build_report
    from ondevice_farm.run_reader import DETAIL_PARTS, load_run

    # summaries a page at a time; whole jobs (op table, node placement, the trace if asked) only
    # for the window shown in detail
    parts = DETAIL_PARTS + (("trace_events",) if trace_dir is not None else ())
    with open_store(state, address) as store:
        run = load_run(store, run_id, detail_jobs=detail_jobs, offset=offset, parts=parts)
        against = load_run(store, against_id, detail_jobs=detail_jobs, parts=parts) if against_id else None
    built = build_report(
        run,
        against,
        model_path=model_path,
        artifacts_root=state.home.artifacts,
        layers=layer_request(state, layers_budget, predict) if layers or predict else None,
    )
    if html_path is not None:
        from ondevice_farm.reports.html import render_report

        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(render_report(built), encoding="utf-8")
    written: list[Path] = []
    if trace_dir is not None:
        from ondevice_farm.reports.trace import write_traces

        written = write_traces(list(run["jobs"]) + list((against or {}).get("jobs") or []), trace_dir)
    if as_json:
        sys.stdout.write(json.dumps(built.to_dict(), default=json_default) + "\n")
        return
    from ondevice_farm.reports.side_by_side import side_by_side_table
    from ondevice_farm.reports.terminal import stdout_console

    console = stdout_console()
    console.print(f"[bold]run {run['run_id']}[/bold]" + (f" against {against['run_id']}" if against else ""))
    console.print(side_by_side_table(built.columns))
    for document in (run, against):
        note = None if document is None else window_note(document, "--offset and --jobs show others")
        if note is not None and document is not None:
            console.print(f"run {document['run_id']}: {note}")
            console.print(groups_table(list(document.get("job_groups") or [])))
    source = (run.get("model") or {}).get("source")
    if source:
        from ondevice_farm.reports.routes import print_routes_table, print_source, routes_table

        print_source(console, source)
        if "error" in (source.get("routes") or {}):
            console.print(f"  CoreML routes not compared: {source['routes']['error']}")
        else:
            print_routes_table(console, routes_table(source.get("routes") or {}, source.get("export_check")))
    if not built.findings:
        console.print("no differences worth naming")
    for index, finding in enumerate(built.findings, start=1):
        console.print(f"{index:>2}. {finding.text}  [dim]({finding.rule})[/dim]", highlight=False)
    if built.layers is not None:
        print_layers(console, built.layers, built.layers_missing)
    if html_path is not None:
        console.print(f"HTML report: {html_path}")
    if written:
        console.print(f"traces: {len(written)} file(s) in {trace_dir} (open them in ui.perfetto.dev)")
