"""Generation jobs in the terminal: one table of the figures a reader of llama-bench or
benchmark_e2e.py looks for, the depth curve, and where the tokens part from the reference."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from ondevice_farm.analysis.reference_state import FAILED, PASSED, reference_state


def _median(figure: dict[str, Any] | None, digits: int = 1) -> str:
    if not figure or figure.get("median") is None:
        return "-"
    text = f"{figure['median']:.{digits}f}"
    if figure.get("std") is not None and figure.get("samples") and len(figure["samples"]) > 1:
        text += f" ± {figure['std']:.{digits}f}"
    return text


def _agreement(generation: dict[str, Any]) -> str:
    agreement = generation.get("agreement")
    if not agreement:
        return "-"
    share = f"{agreement['share'] * 100:.0f}% ({agreement['matching']}/{agreement['tokens']})"
    first = agreement.get("first_divergence")
    return share if first is None else f"{share}, parts at {first}"


def generation_progress(job: dict[str, Any]) -> str:
    """The progress line of a finished generation job (rich markup)."""
    generation = job["generation"]
    reference = reference_state(job)
    colour = {PASSED: "green", FAILED: "bold red"}.get(reference.state, "yellow")
    return (
        f"[green]ok[/green] TTFT {_median(generation.get('ttft_ms'), 2)} ms, "
        f"decode {_median(generation.get('decode_tokens_per_s'))} tokens/s, "
        f"tokens {_agreement(generation)} [{colour}]{reference.label}[/{colour}]"
    )


def generation_table(jobs: list[dict[str, Any]]) -> Table | None:
    """Load, TTFT, prefill and decode rates, memory and token agreement per generation job."""
    rows = [j for j in jobs if j.get("status") == "ok" and j.get("generation")]
    if not rows:
        return None
    table = Table(
        title="Generation (median ± stdev over the timed generations; all measured)", title_justify="left"
    )
    for column, justify in [
        ("device", "left"),
        ("target", "left"),
        ("load ms cold/warm", "right"),
        ("TTFT ms", "right"),
        ("prefill t/s", "right"),
        ("decode t/s", "right"),
        ("token p50/p99 ms", "right"),
        ("peak MB", "right"),
        ("KV cache MB", "right"),
        ("tokens agree", "right"),
        ("logits SNR dB", "right"),
        ("ref", "left"),
    ]:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for job in rows:
        generation = job["generation"]
        tokens = generation.get("token_latency_ms") or {}
        kv = generation.get("kv_cache") or {}
        warm = job.get("warm_load_ms")
        reference = reference_state(job)
        style = {PASSED: "green", FAILED: "bold red"}.get(reference.state, "yellow")
        snr = generation.get("first_step_logits_snr_db")
        table.add_row(
            job["device"],
            job["target"],
            f"{job['load_ms']:.0f}/{'-' if warm is None else f'{warm:.0f}'}",
            _median(generation.get("ttft_ms"), 2),
            _median(generation.get("prefill_tokens_per_s"), 0),
            _median(generation.get("decode_tokens_per_s"), 1),
            "-" if not tokens else f"{tokens['p50']:.2f}/{tokens['p99']:.2f}",
            "-" if job.get("peak_memory_mb") is None else f"{job['peak_memory_mb']:.1f}",
            "-" if not kv else f"{kv['mb']:.2f}" + ("" if kv.get("source") == "measured" else " (est.)"),
            _agreement(generation),
            "-" if snr is None else f"{snr:.1f}",
            Text(reference.label, style=style),
        )
    table.caption = (
        "TTFT: prompt prefill + first token, load excluded; decode t/s: tokens after the first over "
        "their span (docs/generate.md)"
    )
    table.caption_justify = "left"
    return table


def generation_lines(job: dict[str, Any]) -> Text:
    """The depth curve of a job that swept `depth`, and its KV cache's provenance."""
    text = Text()
    generation = job.get("generation")
    if job.get("status") != "ok" or not generation:
        return text
    text.append(
        f"{job['device']} {job['target']}: prompt {generation['prompt_tokens']} tokens, "
        f"decode {generation['decode_tokens']} tokens, {generation['runtime']}\n",
        style="bold",
    )
    depths = generation.get("depths") or []
    if len(depths) > 1:
        text.append("  depth curve (median):\n")
        for entry in depths:
            text.append(
                f"    depth {entry['depth']:>6}: TTFT {_median(entry['ttft_ms'], 2)} ms, "
                f"prefill {_median(entry['prefill_tokens_per_s'], 0)} t/s, "
                f"decode {_median(entry['decode_tokens_per_s'], 1)} t/s\n"
            )
    kv = generation.get("kv_cache")
    if kv:
        how = "read from the runtime's cache tensors" if kv["source"] == "measured" else kv.get("formula")
        text.append(
            f"  KV cache at {kv['context_tokens']} tokens: {kv['bytes']} bytes ({kv['source']}: {how})\n"
        )
    agreement = generation.get("agreement")
    if agreement and agreement.get("first_divergence") is not None:
        at = agreement["first_divergence"]
        reference_tokens, device_tokens = agreement["reference_tokens"], agreement["device_tokens"]
        text.append(
            f"  tokens part from the reference at position {at}: reference "
            f"{reference_tokens[at : at + 5]}, device {device_tokens[at : at + 5]}\n",
            style="red",
        )
    return text
