"""`farm submit MODEL --devices ...`"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ondevice_farm.analysis.reference_state import FAILED, reference_state
from ondevice_farm.api.wire import SubmitOptions
from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_REPEATS,
    DEFAULT_SEED,
    DEFAULT_SUSTAINED_WINDOW_S,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
)
from ondevice_farm.errors import ReferenceCheckError
from ondevice_farm.json_values import json_default


class StderrProgress:
    """Progress on stderr, so stdout stays the report (or the one JSON document)."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.total = 0
        self.done = 0

    def stage(self, text: str) -> None:
        self.console.print(f"[dim]{text}...[/dim]")

    def jobs_started(self, total: int) -> None:
        self.total = total
        self.console.print(f"[dim]running {total} job(s)[/dim]")

    def job_finished(self, job: dict[str, Any]) -> None:
        self.done += 1
        if job["status"] == "ok" and job.get("generation"):
            from ondevice_farm.reports.generation_text import generation_progress

            status = generation_progress(job)
        elif job["status"] == "ok":
            reference = reference_state(job)
            colour = {"passed": "green", "failed": "bold red"}.get(reference.state, "yellow")
            status = (
                f"[green]ok[/green] p50 {job['latency_ms']['p50']:.3f} ms, "
                f"reference [{colour}]{reference.label}[/{colour}]"
            )
        else:
            status = f"[red]failed[/red]: {job.get('error')}"
        self.console.print(f"[{self.done}/{self.total}] {job['device']} {job['target']}: {status}")


def reference_failure(jobs: list[dict[str, Any]]) -> ReferenceCheckError | None:
    """The one line `farm submit` ends with when a job's outputs failed the reference check."""
    failed = [(job, state) for job in jobs if (state := reference_state(job)).state == FAILED]
    if not failed:
        return None
    job, state = failed[0]
    more = f" (and {len(failed) - 1} more job(s))" if len(failed) > 1 else ""
    first = (state.reason or "outside the tolerance").split("; ")[0]
    return ReferenceCheckError(
        f"reference check failed on {job['device']} {job['target']}: {first}{more}; the run is complete"
    )


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--devices",
    "-d",
    default="host-cpu",
    show_default=True,
    help="Profiles (pixel8), units (pixel8:SERIAL), comma-separated.",
)
@click.option("--targets", "-t", help="Narrow the profiles' targets, e.g. ort/cpu,coreml/ane.")
@click.option("--runs", "-n", type=int, default=DEFAULT_TIMED_RUNS, show_default=True, help="Timed runs.")
@click.option(
    "--warmup", type=int, default=DEFAULT_WARMUP_RUNS, show_default=True, help="Untimed warm-up runs."
)
@click.option(
    "--repeats",
    type=int,
    default=DEFAULT_REPEATS,
    show_default=True,
    help="Measurement sessions, each fresh (on the host a fresh process) with its own warm-up and runs.",
)
@click.option("--shape", "shapes", multiple=True, help="Input shape for dynamic dims: name=1x3x224x224.")
@click.option(
    "--inputs",
    "--example-inputs",
    "inputs_npz",
    type=click.Path(path_type=Path),
    help=".npz of input arrays by name (a TorchScript .pt needs it, or --shape).",
)
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of generated inputs.")
@click.option("--threads", type=int, help="ONNX Runtime intra-op threads on host devices.")
@click.option(
    "--tolerance",
    "tolerances",
    multiple=True,
    help="Override reference tolerances, repeatable: [fp32:|fp16:|int8:]atol=X,rtol=X,outside=F,"
    "snr_db=DB,cosine=X,exact=F (defaults by the precision the target computes in; docs/results.md).",
)
@click.option(
    "--reference",
    "reference_model",
    type=click.Path(path_type=Path),
    help="Compare against this model's host outputs (same inputs and outputs), e.g. the float model.",
)
@click.option("--no-profile", is_flag=True, help="Skip the profiled pass (no per-op table).")
@click.option("--coreml-precision", type=click.Choice(["fp16", "fp32"]), default="fp16", show_default=True)
@click.option(
    "--coreml-quantization",
    type=click.Choice(["keep", "float"]),
    default="keep",
    show_default=True,
    help="QDQ models on CoreML: keep 8-bit weights and activations, or fold them to float.",
)
@click.option(
    "--fix",
    "fixes",
    multiple=True,
    help="Pin a scalar input to a value for the whole run (sr=16000; NAME alone: its value in "
    "--inputs): the reference and every target run with it, and CoreML targets fold the Ifs and "
    "shapes it decides.",
)
@click.option(
    "--address",
    help="A running `farm serve`: its submit API, http://HOST:PORT (the fast path), or its Ray "
    "address, HOST:PORT (default: $RAY_ADDRESS, else an embedded local Ray).",
)
@click.option(
    "--embedded",
    is_flag=True,
    help="Run here with an embedded Ray even when a `farm serve` of this farm directory is up "
    "(without --address a plain submit uses that controller: no Ray start here).",
)
@click.option("--adb", multiple=True, help="host:port of an Android unit over TCP (also $FARM_ADB_DEVICES).")
@click.option(
    "--attempts",
    type=int,
    default=DEFAULT_MAX_ATTEMPTS,
    show_default=True,
    help="Tries of a job whose unit disconnects or dies, on other units of its profile.",
)
@click.option(
    "--placement-deadline",
    "placement_deadline_s",
    type=float,
    default=DEFAULT_PLACEMENT_DEADLINE_S,
    show_default=True,
    help="Seconds a job waits while no unit of its profile is up, before it fails.",
)
@click.option(
    "--sustained",
    metavar="DURATION",
    help="After the timed runs, run back to back for this long (90s, 10m): latency, "
    "frequency and temperature per window, and the throttling curve.",
)
@click.option(
    "--sustained-window",
    "sustained_window_s",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_SUSTAINED_WINDOW_S,
    show_default=True,
    help="Seconds per window of a sustained run.",
)
@click.option(
    "--generate",
    metavar="SPEC",
    help="A generation job on an ONNX Runtime GenAI folder: prompt=N,decode=N[,depth=D,D...][,reps=N]"
    "[,warmup=N] (TTFT, prefill and decode tokens/s, token agreement; docs/generate.md).",
)
@click.option(
    "--prompt-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A generation job's prompt: text for the model's tokenizer, or a .json list of token ids "
    "(default: seeded synthetic ids of prompt=N tokens).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option("--wide", is_flag=True, help="The summary as one wide table, whatever the terminal's width.")
@click.pass_obj
@handles_errors
def submit(
    state: CliState,
    model: Path,
    devices: str,
    targets: str | None,
    runs: int,
    warmup: int,
    repeats: int,
    shapes: tuple[str, ...],
    inputs_npz: Path | None,
    seed: int,
    threads: int | None,
    tolerances: tuple[str, ...],
    reference_model: Path | None,
    no_profile: bool,
    coreml_precision: str,
    coreml_quantization: str,
    fixes: tuple[str, ...],
    address: str | None,
    embedded: bool,
    adb: tuple[str, ...],
    attempts: int,
    placement_deadline_s: float,
    sustained: str | None,
    sustained_window_s: float,
    generate: str | None,
    prompt_file: Path | None,
    as_json: bool,
    wide: bool,
) -> None:
    """Compile MODEL (.onnx, or a PyTorch .pt2/.pt checkpoint) per target, run it, and report."""
    options = SubmitOptions(
        devices=devices,
        targets=targets,
        runs=runs,
        warmup=warmup,
        repeats=repeats,
        shapes=shapes,
        seed=seed,
        threads=threads,
        tolerances=tolerances,
        profile_ops=not no_profile,
        coreml_precision=coreml_precision,
        coreml_quantization=coreml_quantization,
        attempts=attempts,
        placement_deadline_s=placement_deadline_s,
        sustained=sustained,
        sustained_window_s=sustained_window_s,
        generate=generate,
        prompt_file_name=None if prompt_file is None else prompt_file.name,
        prompt_file_text=None if prompt_file is None else prompt_file.read_text(),
        fixes=fixes,
    )
    from ondevice_farm.cli.context import farm_of
    from ondevice_farm.python_api.submitting import submit_document

    document = submit_document(
        model,
        options,
        farm_of(state, address, adb, embedded=embedded),
        inputs_npz=inputs_npz,
        reference_model=reference_model,
        progress=StderrProgress(),
        say=lambda line: click.echo(line, err=True),
    )
    if as_json:
        sys.stdout.write(json.dumps(document, default=json_default) + "\n")
    else:
        from ondevice_farm.reports.terminal import print_run

        print_run(document, wide=wide, artifacts_root=state.home.artifacts)
    if any(job["status"] != "ok" for job in document["jobs"]):
        sys.exit(1)
    mismatch = reference_failure(document["jobs"])
    if mismatch is not None:
        raise mismatch
