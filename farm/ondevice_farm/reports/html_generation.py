"""The report's "Generation" section: per job the figures of docs/generate.md, the per-token decode
latency of every timed generation, and the depth curve where the job swept the cache's depth."""

from __future__ import annotations

from typing import Any

from ondevice_farm.reports.compare import Column
from ondevice_farm.reports.html_sections import _num, _table, e
from ondevice_farm.reports.svg_generation import line_plot


def has_generation(columns: list[Column]) -> bool:
    return any(c.ok and c.job.get("generation") for c in columns)


def _median(figure: dict[str, Any] | None, digits: int) -> str:
    if not figure:
        return "-"
    spread = "" if figure.get("std") is None else f" ± {figure['std']:.{digits}f}"
    return f"{figure['median']:.{digits}f}{spread}"


def _agreement(generation: dict[str, Any]) -> str:
    agreement = generation.get("agreement")
    if not agreement:
        return "-"
    first = agreement.get("first_divergence")
    parted = "" if first is None else f", parts at token {first}"
    return f"{agreement['share'] * 100:.1f}% ({agreement['matching']}/{agreement['tokens']}){parted}"


def _token_series(generation: dict[str, Any]) -> list[tuple[str, list[tuple[float, float]]]]:
    """Each timed generation of the headline depth: token index (2 = the first after the first) -> ms."""
    headline = (generation.get("depths") or [{}])[0]
    samples = (headline.get("token_latency_ms") or {}).get("samples") or []
    per_rep = max(1, int(generation["decode_tokens"]) - 1)
    return [
        (
            f"rep {index // per_rep + 1}",
            [(float(i + 2), float(v)) for i, v in enumerate(samples[index : index + per_rep])],
        )
        for index in range(0, len(samples), per_rep)
    ]


def generation(columns: list[Column]) -> str:
    jobs = [c for c in columns if c.ok and c.job.get("generation")]
    rows = []
    parts = []
    for column in jobs:
        job, gen = column.job, column.job["generation"]
        kv = gen.get("kv_cache") or {}
        tokens = gen.get("token_latency_ms") or {}
        rows.append(
            [
                e(column.label),
                _num(job.get("load_ms"), 1) + " / " + _num(job.get("warm_load_ms"), 1),
                _median(gen.get("ttft_ms"), 2),
                _median(gen.get("prefill_tokens_per_s"), 0),
                _median(gen.get("decode_tokens_per_s"), 1),
                " / ".join(_num(tokens.get(k), 3) for k in ("p50", "p90", "p99")),
                _num(job.get("peak_memory_mb"), 1),
                "-"
                if not kv
                else f"{kv['bytes'] / 1e6:.3f} MB at {kv['context_tokens']} ({e(kv['source'])})",
                e(_agreement(gen)),
                _num(gen.get("first_step_logits_snr_db"), 1),
            ]
        )
        series = _token_series(gen)
        parts.append(
            f"<h3>{e(column.label)}: decode latency per token</h3>"
            + line_plot(
                series,
                "token (2 = the first after the first token)",
                "ms",
                f"{column.label} per-token latency",
            )
        )
        depths = gen.get("depths") or []
        if len(depths) > 1:
            decode = [(float(d["depth"]), float(d["decode_tokens_per_s"]["median"])) for d in depths]
            ttft = [(float(d["depth"]), float(d["ttft_ms"]["median"])) for d in depths]
            parts.append(
                f"<h3>{e(column.label)}: depth curve</h3>"
                + line_plot(
                    [("decode tokens/s", decode)],
                    "tokens in the cache before the prompt",
                    "tokens/s",
                    "decode rate by depth",
                )
                + line_plot([("TTFT", ttft)], "tokens in the cache before the prompt", "ms", "TTFT by depth")
            )
    table = _table(
        ["job", "load cold / warm ms", "TTFT ms", "prefill t/s", "decode t/s", "token p50 / p90 / p99 ms",
         "peak MB", "KV cache", "tokens agree", "logits SNR dB"],
        rows,
        numeric={1, 2, 3, 4, 5, 6, 9},
    )  # fmt: skip
    note = (
        '<p class="muted">Measured on the units (median ± stdev over the timed generations). TTFT: the '
        "prompt's prefill and the first token, load excluded; decode t/s: the tokens after the first "
        "over their span; definitions and their sources in docs/generate.md.</p>"
    )
    return table + note + "".join(parts)
