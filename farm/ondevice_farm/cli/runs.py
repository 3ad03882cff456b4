"""`farm runs` and `farm show RUN_ID`: what the store holds."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import click
from rich.table import Table

from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.controller.results import RunStore
from ondevice_farm.json_values import json_default
from ondevice_farm.reports.fit import fit_table
from ondevice_farm.reports.job_groups import groups_table, window_note
from ondevice_farm.reports.terminal import stdout_console
from ondevice_farm.run_follow import stopped_following, wait_for_end
from ondevice_farm.run_reader import (
    DEFAULT_DETAIL_JOBS,
    RunReader,
    iter_whole_jobs,
    load_run,
    resolve_run,
    run_header,
)

#: `farm show --follow`: someone is watching, so a line each 10 s while jobs are being stored
SHOW_REPORT_EVERY_S = 10.0

ADDRESS_HELP = (
    "Read the fleet's store through the controller (`farm serve`): its Ray address HOST:PORT, "
    "or its submit API http://HOST:PORT (no Ray needed here)."
)


@contextmanager
def open_store(state: CliState, address: str | None = None) -> Iterator[RunStore]:
    """The results store for reading, as the Python API opens it (`python_api/stored.py`)."""
    from ondevice_farm.cli.context import farm_of
    from ondevice_farm.python_api.stored import open_run_store

    with open_run_store(farm_of(state, address)) as store:
        yield store


F = TypeVar("F", bound=Callable[..., Any])


def detail_window_options(shown: str) -> Callable[[F], F]:
    """`--jobs` and `--offset`: the window of a run's jobs read whole and shown in detail
    (run_reader.load_run); `shown` says what the command shows of each."""

    def add(command: F) -> F:
        command = click.option(
            "--offset",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Skip this many of the run's jobs (by finish time) before those shown in detail.",
        )(command)
        return click.option(
            "--jobs",
            "detail_jobs",
            type=click.IntRange(min=1),
            default=DEFAULT_DETAIL_JOBS,
            show_default=True,
            help=f"{shown}; a table per model and target counts every job.",
        )(command)

    return add


@click.command()
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--address", help=ADDRESS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_obj
@handles_errors
def runs(state: CliState, limit: int, address: str | None, as_json: bool) -> None:
    """List stored runs, newest first."""
    with open_store(state, address) as store:
        rows = store.runs(limit=limit)
        listing = [
            {
                "run_id": r.run_id,
                "created_at": r.created_at,
                "finished_at": r.finished_at,
                "kind": r.kind,
                "suite": r.suite,
                "status": r.status,
                "model": r.document.get("model", {}).get("name"),
                "jobs": store.job_counts(r.run_id),
                "planned_jobs": r.document.get("planned_jobs"),
            }
            for r in rows
        ]
    if as_json:
        sys.stdout.write(json.dumps({"runs": listing}) + "\n")
        return
    table = Table(title="Runs", title_justify="left")
    for column in ("run", "when (UTC)", "kind", "model", "status", "jobs ok/failed"):
        table.add_column(column)
    for r in listing:
        table.add_row(
            r["run_id"],
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["created_at"])),
            r["kind"],
            str(r["model"] or r["suite"] or "-"),
            r["status"],
            jobs_cell(r["jobs"], r["planned_jobs"] if r["status"] == "running" else None),
        )
    console = stdout_console()
    for part in fit_table(console, table, console.width, keep=1):
        console.print(part)


def jobs_cell(counts: dict[str, int], planned: int | None) -> str:
    """`ok/failed`, and for a run still running how many of its planned jobs are stored."""
    cell = f"{counts.get('ok', 0)}/{counts.get('failed', 0)}"
    return (
        cell if not isinstance(planned, int) else f"{cell} ({sum(counts.values()):,} of {planned:,} stored)"
    )


@click.command()
@click.argument("run_id")
@click.option("--address", help=ADDRESS_HELP)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout: the run and every job whole, written as each is read.",
)
@click.option("--wide", is_flag=True, help="The summary as one wide table, whatever the terminal's width.")
@click.option(
    "--follow",
    is_flag=True,
    help="A run still running: say its progress (jobs stored of planned) until it ends, then show it. "
    "Ctrl-C stops following; the run goes on.",
)
@detail_window_options("Jobs shown in detail (rows, op tables)")
@click.pass_obj
@handles_errors
def show(
    state: CliState,
    run_id: str,
    address: str | None,
    as_json: bool,
    wide: bool,
    follow: bool,
    detail_jobs: int,
    offset: int,
) -> None:
    """Show one stored run (an id, a unique prefix of one, or `latest`)."""
    from ondevice_farm.reports.terminal import print_run

    # bound before the store opens: through a controller, Ray's driver makes `sys.stdout` stderr
    # while it runs (controller/cluster.py), and the JSON is written while it does
    stdout = sys.stdout
    with open_store(state, address) as store:
        if follow:
            run_id = follow_to_end(store, run_id)
        if as_json:
            write_run_json(store, run_id, stdout)
            return
        document = load_run(store, run_id, detail_jobs=detail_jobs, offset=offset)
    print_run(document, wide=wide, artifacts_root=state.home.artifacts)
    note = window_note(document, "--offset and --jobs show others")
    if note is not None:
        console = stdout_console()
        console.print(note)
        console.print(groups_table(list(document.get("job_groups") or [])))


def follow_to_end(store: RunStore, run_id: str) -> str:
    """The run's id once it is no longer running, its progress said on stderr meanwhile."""
    resolved = resolve_run(store, run_id)
    try:
        wait_for_end(
            store,
            store.run(resolved),
            lambda line: click.echo(line, err=True),
            report_every_s=SHOW_REPORT_EVERY_S,
        )
    except KeyboardInterrupt:
        click.echo(stopped_following(resolved), err=True)
        raise
    return resolved


def write_run_json(store: RunReader, run_id: str, out: TextIO) -> None:
    """The run as one JSON document, its jobs whole (as the run schema has them) but written one
    at a time as each is read: memory holds one job, whatever the run's size."""
    header = {k: v for k, v in run_header(store, run_id).items() if k != "jobs"}
    opening = json.dumps({**header, "jobs": []}, default=json_default)
    out.write(opening[: -len("[]}")] + "[")
    for index, job in enumerate(iter_whole_jobs(store, str(header["run_id"]))):
        out.write(("," if index else "") + json.dumps(job, default=json_default))
    out.write("]}\n")
