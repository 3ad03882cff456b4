"""A run as terminal tables (rich): the summary first, then per job what explains it."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from farm.analysis.sessions import spread_warnings

TOP_OPS = 8


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _worst_output(job: dict[str, Any]) -> dict[str, Any] | None:
    outputs = job.get("reference", {}).get("outputs", {})
    if not outputs:
        return None
    worst: dict[str, Any] = min(outputs.values(), key=lambda o: -1e9 if o["snr_db"] is None else o["snr_db"])
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
        passed = job["reference"]["passed"]
        table.add_row(
            job["device"],
            job["target"],
            Text("ok", style="green"),
            _ms(lat["p50"]),
            _ms(lat["p90"]),
            _ms(lat["p99"]),
            f"{lat['cv']:.3f}",
            _ms(job["first_inference_ms"]),
            _ms(job["load_ms"]),
            "-" if job["peak_memory_mb"] is None else f"{job['peak_memory_mb']:.1f}",
            f"{compile_['nodes_before']}->{compile_['nodes_after']}",
            str(len(job["fallback_ops"])),
            "-" if worst is None or worst["snr_db"] is None else f"{worst['snr_db']:.1f}",
            "-" if worst is None or worst["max_abs"] is None else f"{worst['max_abs']:.2e}",
            Text("pass" if passed else "FAIL", style="green" if passed else "bold red"),
        )
    return table


def ops_table(job: dict[str, Any], top: int = TOP_OPS) -> Table:
    table = Table(title=f"Slowest ops on {job['device']} {job['target']}", title_justify="left")
    for column in ("node", "op type", "backend", "mean us", "share"):
        table.add_column(column, justify="right" if column in ("mean us", "share") else "left")
    for op in sorted(job["ops"], key=lambda o: -o["mean_us"])[:top]:
        table.add_row(
            op["name"],
            op["op_type"],
            op["provider"].removesuffix("ExecutionProvider"),
            f"{op['mean_us']:.1f}",
            f"{op['share'] * 100:.1f}%",
        )
    return table


def compile_lines(job: dict[str, Any]) -> Text:
    compile_ = job["compile"]
    text = Text()
    text.append(f"{job['device']} {job['target']}: ", style="bold")
    text.append(
        f"{compile_['nodes_before']} nodes -> {compile_['nodes_after']}, precision {job['precision']}, "
        f"placement {compile_['placement'] or job['placement']}, partitions {compile_['partitions']}\n"
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


def render_run(document: dict[str, Any]) -> Group:
    model = document["model"]
    header = Text()
    header.append(f"run {document['run_id']}", style="bold")
    header.append(
        f"  model {model['name']} (sha256 {model['sha256'][:12]}, opset {model['opset']}, "
        f"{model['nodes']} nodes)  status {document.get('status', '?')}\n"
    )
    parts: list[Any] = [header, summary_table(document["jobs"])]
    for job in document["jobs"]:
        if job["status"] == "ok":
            parts.append(compile_lines(job))
            if job["ops"]:
                parts.append(ops_table(job))
    return Group(*parts)


#: piped output has no terminal width to follow; wide enough that the summary is not squeezed
PIPED_WIDTH = 170


def stdout_console() -> Console:
    """Rich on stdout: the terminal's width, or a wide page when piped."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


def print_run(document: dict[str, Any], console: Console | None = None) -> None:
    (console or stdout_console()).print(render_run(document))
