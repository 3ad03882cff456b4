"""`farm compare BASE CANDIDATE --devices ...`: is B slower than A, on each device and target?"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.cli.submit import StderrProgress
from ondevice_farm.config import DEFAULT_SEED, DEFAULT_TIMED_RUNS, DEFAULT_WARMUP_RUNS
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.json_values import json_default

#: `farm compare` exits with this when B is slower than A on any pair
EXIT_SLOWER = 1


class CompareProgress(StderrProgress):
    """`farm submit`'s progress, each finished pair told by its verdict."""

    def job_finished(self, job: dict[str, Any]) -> None:
        self.done += 1
        if job["status"] == "ok" and "metrics" in job:  # a generation pair: each metric's ratio
            from ondevice_farm.reports.paired_generation import metric_summary

            what = f"{job['verdict']} ({metric_summary(job)}, {job['rounds']} rounds)"
        elif job["status"] == "ok":
            lo, hi = job["interval"]
            what = f"{job['verdict']} (B/A {job['ratio']:.3f} [{lo:.3f}, {hi:.3f}], {job['rounds']} rounds)"
        else:
            what = f"failed: {job['error']}"
        self.console.print(f"[{self.done}/{self.total}] {job['requested']} {job['target']}: {what}")


def _writable(path: Path | None, flag: str) -> None:
    if path is not None and not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: no folder {path.parent}")


@click.command()
@click.argument("baseline", metavar="BASE")
@click.argument("candidate", metavar="CANDIDATE")
@click.option(
    "--devices", "-d", default="host-cpu", show_default=True, help="Profiles or units, comma-separated."
)
@click.option("--targets", "-t", help="Narrow the profiles' targets, e.g. ort/cpu,ort/xnnpack.")
@click.option(
    "--runs", "-n", type=int, default=DEFAULT_TIMED_RUNS, show_default=True, help="Timed runs per session."
)
@click.option(
    "--warmup", type=int, default=DEFAULT_WARMUP_RUNS, show_default=True, help="Warm-up runs per session."
)
@click.option("--shape", "shapes", multiple=True, help="Input shape for dynamic dims: name=1x3x224x224.")
@click.option("--inputs", "inputs_npz", type=click.Path(path_type=Path), help=".npz of input arrays by name.")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of generated inputs.")
@click.option(
    "--threads",
    default="1",
    show_default=True,
    help="Intra-op threads of every session, or `default` (the runtime's choice).",
)
@click.option(
    "--pin",
    default="auto",
    show_default=True,
    help="Cores the sessions are pinned to: auto (the profile's performance cores; on the host its "
    "last CPUs), none, or CPU numbers (2,3).",
)
@click.option(
    "--spinning",
    type=click.Choice(["default", "on", "off"]),
    default="default",
    show_default=True,
    help="ONNX Runtime's intra-op thread spinning.",
)
@click.option(
    "--min-effect",
    type=float,
    default=0.03,
    show_default=True,
    help="`same` when the ratio's interval lies inside +/- this fraction.",
)
@click.option("--alpha", type=float, default=0.01, show_default=True, help="Error rate of the whole compare.")
@click.option("--max-rounds", type=int, default=200, show_default=True, help="Rounds per device and target.")
@click.option(
    "--budget",
    default="10m",
    show_default=True,
    help="Device time per device and target for its rounds (90s, 10m).",
)
@click.option("--order-seed", type=int, help="Seed of the rounds' A/B orders (default: drawn and recorded).")
@click.option(
    "--generate",
    help="BASE and CANDIDATE are ONNX Runtime GenAI folders, judged on TTFT and decode tokens/s: "
    "prompt=N,decode=N[,reps=N][,warmup=N] (docs/compare.md); --runs and --warmup do not apply.",
)
@click.option(
    "--address", help="Ray address of a running `farm serve` (default: $RAY_ADDRESS, else embedded)."
)
@click.option("--adb", multiple=True, help="host:port of an Android unit over TCP (also $FARM_ADB_DEVICES).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--html", "html_path", type=click.Path(path_type=Path, dir_okay=False), help="Write an HTML page."
)
@click.option(
    "--markdown", "markdown_path", type=click.Path(path_type=Path, dir_okay=False), help="Write a PR comment."
)
@click.pass_obj
@handles_errors
def compare(
    state: CliState,
    baseline: str,
    candidate: str,
    devices: str,
    targets: str | None,
    runs: int,
    warmup: int,
    shapes: tuple[str, ...],
    inputs_npz: Path | None,
    seed: int,
    threads: str,
    pin: str,
    spinning: str,
    min_effect: float,
    alpha: float,
    max_rounds: int,
    budget: str,
    order_seed: int | None,
    generate: str | None,
    address: str | None,
    adb: tuple[str, ...],
    as_json: bool,
    html_path: Path | None,
    markdown_path: Path | None,
) -> None:
    """Is CANDIDATE slower than BASE? Both (model files, or run:RUN_ID) run interleaved, in random
    order, on the same units; exit 1 if B is slower on any device and target."""
    from ondevice_farm.cli.context import farm_of
    from ondevice_farm.python_api.comparing import compare_document, compare_request
    from ondevice_farm.reports.paired import compare_html, compare_markdown, print_compare
    from ondevice_farm.reports.paired_generation import (
        generation_compare_html,
        generation_compare_markdown,
        print_generation_compare,
    )

    _writable(html_path, "--html")
    _writable(markdown_path, "--markdown")
    if threads == "default":
        thread_count = None
    elif threads.isdigit() and int(threads) >= 1:
        thread_count = int(threads)
    else:
        raise UsageError(f"--threads {threads!r}: expected a positive count or `default`")
    request = compare_request(
        baseline,
        candidate,
        devices=devices,
        targets=targets,
        runs=runs,
        warmup=warmup,
        shapes=shapes,
        inputs_npz=inputs_npz,
        seed=seed,
        threads=thread_count,
        pin=pin,
        spinning=None if spinning == "default" else spinning == "on",
        min_effect=min_effect,
        alpha=alpha,
        max_rounds=max_rounds,
        budget=budget,
        order_seed=order_seed,
        generate=generate,
    )
    document = compare_document(request, farm_of(state, address, adb), CompareProgress())
    if document["settings"].get("generate"):  # two folders: a table and plots per metric
        print_compare, compare_html, compare_markdown = (
            print_generation_compare,
            generation_compare_html,
            generation_compare_markdown,
        )
    if html_path is not None:
        html_path.write_text(compare_html(document))
    if markdown_path is not None:
        markdown_path.write_text(compare_markdown(document))
    if as_json:
        sys.stdout.write(json.dumps(document, default=json_default) + "\n")
    else:
        print_compare(document)
    verdicts = [c["verdict"] for c in document["comparisons"]]
    if "slower" in verdicts:
        sys.exit(EXIT_SLOWER)
    failed = [c for c in document["comparisons"] if c["status"] != "ok"]
    if failed:
        first = failed[0]
        raise DeviceError(f"{first['requested']} {first['target']}: {first['error']}; no verdict for it")
