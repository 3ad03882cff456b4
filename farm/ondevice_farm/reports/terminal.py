"""A run as terminal tables (rich): the summary first, then per job what explains it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ondevice_farm.analysis.reference_state import FAILED, PASSED, reference_state
from ondevice_farm.analysis.spread import spread_warnings
from ondevice_farm.compile.placement import short_provider
from ondevice_farm.op_rows import op_statistic_label, op_time_us
from ondevice_farm.reports.energy_text import energy_lines
from ondevice_farm.reports.fit import fit_table, table_width
from ondevice_farm.reports.generation_text import generation_lines, generation_table
from ondevice_farm.reports.kernel_sources import kernel_sources_of
from ondevice_farm.reports.provenance import describe, placement_mark, time_mark
from ondevice_farm.reports.subject import is_nightly, run_subject
from ondevice_farm.reports.sustained_text import sustained_lines

TOP_OPS = 8


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _worst_output(job: dict[str, Any]) -> dict[str, Any] | None:
    outputs = job.get("reference", {}).get("outputs", {})
    if not outputs:
        return None
    # a failing output first, then the lowest SNR; outputs without an SNR (integer, string) last
    worst: dict[str, Any] = min(
        outputs.values(),
        key=lambda o: (o.get("passed") is not False, 1e9 if o.get("snr_db") is None else o["snr_db"]),
    )
    return worst


def summary_table(jobs: list[dict[str, Any]]) -> Table:
    table = Table(title="Latency and accuracy per device and target", title_justify="left")
    for column, justify in [
        ("device", "left"),
        ("target", "left"),
        ("status", "left"),
        ("p50 ms", "right"),
        ("p90 ms", "right"),
        ("p99 ms", "right"),
        ("cv", "right"),
        ("first ms", "right"),
        ("load ms", "right"),
        ("peak MB", "right"),
        ("nodes", "right"),
        ("CPU fallbacks", "right"),
        ("SNR dB", "right"),
        ("max |err|", "right"),
        ("ref", "left"),
    ]:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for job in jobs:
        if job["status"] != "ok":
            table.add_row(
                job["device"],
                job["target"],
                Text("failed", style="red"),
                *["-"] * 11,
                Text(job.get("error", "")[:60], style="red"),
            )
            continue
        lat = job["latency_ms"]
        worst = _worst_output(job)
        compile_ = job["compile"]
        reference = reference_state(job)
        style = {PASSED: "green", FAILED: "bold red"}.get(reference.state, "yellow")
        table.add_row(
            job["device"],
            job["target"],
            Text("ok", style="green"),
            _ms(lat["p50"]),
            _ms(lat["p90"]),
            _ms(lat["p99"]),
            "-" if lat.get("cv") is None else f"{lat['cv']:.3f}",
            _ms(job["first_inference_ms"]),
            _ms(job["load_ms"]),
            "-" if job["peak_memory_mb"] is None else f"{job['peak_memory_mb']:.1f}",
            f"{compile_['nodes_before']}->{compile_['nodes_after']}",
            str(len(job["fallback_ops"])),
            "-" if worst is None or worst["snr_db"] is None else f"{worst['snr_db']:.1f}",
            "-" if worst is None or worst["max_abs"] is None else f"{worst['max_abs']:.2e}",
            Text(reference.label, style=style),
        )
    return table


def reference_lines(job: dict[str, Any]) -> Text:
    """Why a job's reference check failed, or why its outputs were not compared; and against what."""
    reference = reference_state(job)
    text = Text()
    model = (job.get("reference") or {}).get("model") or {}
    if reference.state == PASSED:
        if model.get("source") == "--reference":
            text.append(f"  reference: passed against {model.get('name')} (--reference)\n", style="dim")
        return text
    against = f" against {model.get('name')} (--reference)" if model.get("source") == "--reference" else ""
    if reference.state == FAILED:
        text.append(f"  reference check FAILED{against}:\n", style="bold red")
        for line in (reference.reason or "").split("; "):
            text.append(f"    {line}\n", style="red")
    else:
        text.append(f"  reference not compared: {reference.reason}\n", style="yellow")
    return text


#: source nodes named per kernel in the slowest-ops table; more are counted, not named
MAX_SOURCES_NAMED = 3


def _sources_cell(sources: list[str] | None) -> str:
    if sources is None:
        return "?"
    named = ", ".join(sources[:MAX_SOURCES_NAMED])
    more = len(sources) - MAX_SOURCES_NAMED
    return named + (f" +{more} more" if more > 0 else "")


def ops_table(
    job: dict[str, Any],
    top: int = TOP_OPS,
    sources: dict[str, list[str]] | None = None,
    width: int | None = None,
) -> Table:
    """The slowest kernels, each with the source nodes it ran (the report's alignment), where the
    source model was found; `sources`: kernel name -> source node names. Where a column of their
    own does not fit `width`, the sources go under the kernel's name."""
    if sources is not None and width is not None:
        full = _ops_table(job, top, sources, stacked=False)
        if table_width(Console(width=width), full) > width:
            return _ops_table(job, top, sources, stacked=True)
        return full
    return _ops_table(job, top, sources, stacked=False)


def _ops_table(job: dict[str, Any], top: int, sources: dict[str, list[str]] | None, stacked: bool) -> Table:
    table = Table(title=f"Slowest ops on {job['device']} {job['target']}", title_justify="left")
    table.add_column("kernel <- source nodes" if stacked else "kernel", overflow="fold")
    table.add_column("op type", overflow="fold")
    if sources is not None and not stacked:
        table.add_column("source nodes", overflow="fold")
    table.add_column("backend")
    # ranked and shared by the median per run where the profile recorded its runs: one slow
    # profiled run moves a mean, not a median (ondevice_farm.analysis.op_table)
    by_median = op_statistic_label(job["ops"]) == "median"
    table.add_column("median us" if by_median else "mean us", justify="right", no_wrap=True)
    if by_median:
        table.add_column("mean us", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    for op in sorted(job["ops"], key=lambda o: -(op_time_us(o) or 0.0))[:top]:
        cells: list[Any] = [op["name"], op["op_type"]]
        if sources is not None and stacked:
            cells[0] = Text(op["name"]).append(f"\n<- {_sources_cell(sources.get(op['name']))}", style="dim")
        elif sources is not None:
            cells.append(_sources_cell(sources.get(op["name"])))
        cells += [
            op["provider"].removesuffix("ExecutionProvider") + placement_mark(op),
            f"{time_mark(op)}{op_time_us(op) or 0.0:.1f}",
            *([f"{op['mean_us']:.1f}"] if by_median else []),
            f"{op['share'] * 100:.1f}%",
        ]
        table.add_row(*cells)
    legend = [f"{label}: {how}" for label, how in describe(job) if not how.startswith("measured")]
    if by_median:
        runs = max(int(op.get("runs") or 0) for op in job["ops"])
        legend.insert(0, f"each kernel's time per run over {runs} profiled runs; shares of the medians")
    if legend:  # the legend under the table: how its figures were obtained, which were not measured
        table.caption = "; ".join(legend)
        table.caption_justify = "left"
    return table


def _per_backend(counts: dict[str, Any]) -> str:
    return ", ".join(f"{short_provider(str(k))} {v}" for k, v in sorted(counts.items()))


def compile_lines(job: dict[str, Any]) -> Text:
    compile_ = job["compile"]
    text = Text()
    text.append(f"{job['device']} {job['target']}: ", style="bold")
    text.append(f"{compile_['nodes_before']} nodes -> {compile_['nodes_after']} after optimisation\n")
    text.append(f"  precision {job['precision']}, partitions {compile_['partitions']}\n")
    # the same count the report shows: kernels the profile saw per backend, else the compiler's
    # placement, which is of the graph the partitioner saw (before the last fusions)
    if job.get("placement"):
        text.append(f"  kernels per backend (profiled): {_per_backend(job['placement'])}\n")
    elif compile_.get("placement"):
        placed = sum(int(v) for v in compile_["placement"].values())
        text.append(
            f"  nodes per backend as partitioned ({placed}, after basic optimisations): "
            f"{_per_backend(compile_['placement'])}\n"
        )
    fused = [f"{f['op_type']} {f['before']}->{f['after']}" for f in compile_["fusions"]]
    if fused:
        text.append("  op changes: " + ", ".join(fused) + "\n")
    # robust spread within a session and between sessions: the cv fired on one outlier
    for warning in spread_warnings(job["latency_ms"]):
        text.append(f"  warning: {warning}\n", style="yellow")
    for note in job.get("notes", []):
        text.append(f"  note: {note}\n", style="dim")
    return text


def render_run(
    document: dict[str, Any],
    console: Console | None = None,
    *,
    wide: bool = False,
    kernel_sources: dict[int, dict[str, list[str]]] | None = None,
) -> Group:
    """The run for `console`'s width: the summary as one table where it fits (or `wide`), else
    dealt out over narrower tables that each repeat device and target. `kernel_sources`: per job
    index, kernel name -> the source nodes it ran."""
    console = console or stdout_console()
    header = Text()
    header.append(f"run {document['run_id']}", style="bold")
    header.append(f"  status {document.get('status', '?')}\n")
    if is_nightly(document):  # a suite's run has no one model: name the suite and its models
        header.append(run_subject(document) + "\n")
    else:
        model = document["model"]
        # a checkpoint torch.onnx.export refused has no ONNX graph to count
        graph = (
            "no ONNX export"
            if model.get("opset") is None
            else f"opset {model['opset']}, {model['nodes']} nodes"
        )
        header.append(f"model {model['name']} (sha256 {model['sha256'][:12]}, {graph})\n")
    pinned = (document.get("settings") or {}).get("fixed_inputs") or {}
    if pinned:  # --fix: said once here, since every job and the reference ran with these values
        header.append("inputs pinned (--fix): " + ", ".join(f"{k}={v}" for k, v in pinned.items()) + "\n")
    summary = summary_table(document["jobs"])
    tables = [summary] if wide else fit_table(console, summary, console.width)
    parts: list[Any] = [header, *tables]
    generation = generation_table(document["jobs"])
    if generation is not None:
        parts.extend([generation] if wide else fit_table(console, generation, console.width))
    for index, job in enumerate(document["jobs"]):
        if job["status"] == "ok":
            parts.append(generation_lines(job))
            parts.append(compile_lines(job))
            parts.append(reference_lines(job))
            parts.append(sustained_lines(job))
            parts.append(energy_lines(job))
            if job["ops"]:
                sources = None if kernel_sources is None else kernel_sources.get(index, {})
                parts.append(ops_table(job, sources=sources, width=None if wide else console.width))
    return Group(*parts)


#: piped output has no terminal width to follow; wide enough that the summary is not squeezed
PIPED_WIDTH = 170


def stdout_console() -> Console:
    """Rich on stdout: the terminal's width, or a wide page when piped (unless $COLUMNS, which
    rich reads itself, says how wide)."""
    console = Console()
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return Console(width=PIPED_WIDTH)


def print_run(
    document: dict[str, Any],
    console: Console | None = None,
    *,
    wide: bool = False,
    artifacts_root: Path | None = None,
) -> None:
    """`wide`: the whole summary as one table, however narrow the terminal (it wraps rather than
    cuts). `artifacts_root`: where to look for the source model if it moved (for the op sources)."""
    console = console or stdout_console()
    if wide:
        needed = table_width(console, summary_table(document["jobs"]))
        if needed > console.width:
            console = Console(width=needed, force_terminal=console.is_terminal)
    sources = kernel_sources_of(document, artifacts_root)
    console.print(render_run(document, console, wide=wide, kernel_sources=sources))
