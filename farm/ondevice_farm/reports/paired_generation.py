"""A generation compare's verdicts for people: per pair, TTFT and decode tokens/s, each with its
verdict, A's and B's figures, the ratio oriented so that above 1 is B slower, and its interval
(farm/ondevice_farm/analysis/paired_generation.py); the HTML draws a paired plot per metric."""

from __future__ import annotations

import html
from typing import Any

from rich.console import Console
from rich.table import Table

from ondevice_farm.analysis.paired_generation import DECODE_RATE, GENERATION_METRICS, TTFT
from ondevice_farm.reports.paired import COLOURS, paired_svg

LABELS = {TTFT: "TTFT", DECODE_RATE: "decode t/s"}
#: how each metric's ratio is read in a table heading
RATIO_LABELS = {TTFT: "B/A", DECODE_RATE: "A/B"}
#: a round's stored keys per metric (A, B), and whether a higher figure is slower
ROUND_KEYS = {
    TTFT: ("baseline_ttft_ms", "candidate_ttft_ms", True),
    DECODE_RATE: ("baseline_decode_tokens_per_s", "candidate_decode_tokens_per_s", False),
}


def _figure(metric: str, value: float) -> str:
    return f"{value:.3f} ms" if metric == TTFT else f"{value:.1f} t/s"


def _ratio(m: dict[str, Any]) -> str:
    lo, hi = m["interval"]
    return f"{m['ratio']:.3f} [{lo:.3f}, {hi:.3f}]"


def metric_summary(c: dict[str, Any]) -> str:
    """`TTFT same B/A 1.004 [0.98, 1.03], decode t/s same A/B ...`: one line of a pair's metrics."""
    return ", ".join(
        f"{LABELS[k]} {c['metrics'][k]['verdict']} {RATIO_LABELS[k]} {_ratio(c['metrics'][k])}"
        for k in GENERATION_METRICS
    )


def _to_decide(m: dict[str, Any]) -> str:
    need = m.get("to_decide") or {}
    if need.get("rounds") is None:
        return "the ratio sits on the --min-effect boundary: no affordable number of rounds decides it"
    return (
        f"about {need['rounds']} rounds (~{need['device_time_s'] / 60:.1f} min of device time) "
        "would decide it at this spread: raise --max-rounds/--budget"
    )


def _method_line(settings: dict[str, Any]) -> str:
    return (
        f"{settings['method']}; {1 - settings['alpha']:.0%} family-wise (alpha "
        f"{settings['alpha_per_pair']:.2g} per metric of each pair: Bonferroni over pairs and the two "
        f"metrics), same = inside +/-{settings['min_effect']:.0%}; --generate {settings['generate']}; "
        f"threads {settings['threads'] or 'default'}, pin {settings['pin']}; "
        "TTFT and decode t/s are each session's best of its timed generations (least TTFT, highest rate), "
        "measured"
    )


def print_generation_compare(document: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    a, b = document["baseline"], document["candidate"]
    console.print(f"A: {a['name']} ({a['source']})   B: {b['name']} ({b['source']})")
    table = Table(show_header=True, header_style="bold")
    for column in ("device", "metric", "A", "B", "ratio [interval]", "rounds", "verdict"):
        table.add_column(column)
    for c in document["comparisons"]:
        if c["status"] != "ok":
            table.add_row(c["requested"], "", "", "", "", "", f"[red]failed[/red]: {c['error']}")
            continue
        for metric in GENERATION_METRICS:
            m = c["metrics"][metric]
            colour = COLOURS[m["verdict"]]
            table.add_row(
                c["requested"],
                LABELS[metric],
                _figure(metric, m["baseline"]),
                _figure(metric, m["candidate"]),
                f"{RATIO_LABELS[metric]} {_ratio(m)}",
                f"{c['rounds']} ({c['stopped']})",
                f"[{colour}]{m['verdict']}[/{colour}]",
            )
        colour = COLOURS[c["verdict"]]
        table.add_row(
            c["requested"], "[bold]pair[/bold]", "", "", "", "", f"[{colour}]{c['verdict']}[/{colour}]"
        )
    console.print(table)
    console.print(f"[dim]{_method_line(document['settings'])}[/dim]")
    for c in document["comparisons"]:
        for metric in GENERATION_METRICS if c["status"] == "ok" else ():
            if c["metrics"][metric]["verdict"] == "inconclusive":
                console.print(
                    f"{c['requested']} {LABELS[metric]}: inconclusive; {_to_decide(c['metrics'][metric])}"
                )


def generation_compare_markdown(document: dict[str, Any]) -> str:
    a, b = document["baseline"], document["candidate"]
    lines = [
        f"### farm compare: `{b['name']}` (B) against `{a['name']}` (A), generation",
        "",
        "| device | metric | A | B | ratio | interval | rounds | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in document["comparisons"]:
        if c["status"] != "ok":
            lines.append(f"| {c['requested']} | | | | | | | failed: {c['error']} |")
            continue
        for metric in GENERATION_METRICS:
            m = c["metrics"][metric]
            lo, hi = m["interval"]
            mark = {"slower": "**slower**"}.get(m["verdict"], m["verdict"])
            lines.append(
                f"| {c['requested']} | {LABELS[metric]} | {_figure(metric, m['baseline'])} | "
                f"{_figure(metric, m['candidate'])} | {RATIO_LABELS[metric]} {m['ratio']:.3f} | "
                f"[{lo:.3f}, {hi:.3f}] | {c['rounds']} | {mark} |"
            )
    lines += [
        "",
        "A and B measured interleaved in random order on the same unit; "
        + _method_line(document["settings"])
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _metric_html(c: dict[str, Any], metric: str) -> str:
    m = c["metrics"][metric]
    lo, hi = m["interval"]
    a_key, b_key, higher_is_slower = ROUND_KEYS[metric]
    note = f" {html.escape(_to_decide(m))}" if m["verdict"] == "inconclusive" else ""
    return (
        f'<h3>{LABELS[metric]}: <span class="verdict {m["verdict"]}">{m["verdict"]}</span></h3>'
        f"<p>{html.escape(m['definition'])}. A {_figure(metric, m['baseline'])}, B "
        f"{_figure(metric, m['candidate'])} (geometric means of the rounds, measured); "
        f"{RATIO_LABELS[metric]} {m['ratio']:.3f}, interval [{lo:.3f}, {hi:.3f}] at level {m['level']:.6f}; "
        f"anytime p-value {m['p_value']:.3g}.{note}</p>"
        + paired_svg(c["round_details"], a_key, b_key, m["unit"], higher_is_slower=higher_is_slower)
    )


def generation_compare_html(document: dict[str, Any]) -> str:
    a, b = document["baseline"], document["candidate"]
    title = f"farm compare: {b['name']} against {a['name']} (generation)"
    sections = []
    for c in document["comparisons"]:
        head = f"{html.escape(c['requested'])} {html.escape(c['target'])}"
        if c["status"] != "ok":
            sections.append(
                f"<section><h2>{head}</h2><p>failed: {html.escape(str(c['error']))}</p></section>"
            )
            continue
        sections.append(
            f'<section><h2>{head}: <span class="verdict {c["verdict"]}">{c["verdict"]}</span></h2>'
            f"<p>{c['rounds']} rounds ({c['stopped']}), A first in {c['first']['A']}, B first in "
            f"{c['first']['B']}; unit {html.escape(str(c.get('unit')))}; controls: "
            f"{html.escape(', '.join(f'{k} {v}' for k, v in c['settings'].items()))}</p>"
            + "".join(_metric_html(c, metric) for metric in GENERATION_METRICS)
            + "</section>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        ".slower{color:#c0392b}.faster{color:#1e8449}.same{color:#2471a3}.inconclusive{color:#b9770e}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>A: {html.escape(a['source'])} ({a['sha256'][:12]}); B: {html.escape(b['source'])} "
        f"({b['sha256'][:12]}). {html.escape(_method_line(document['settings']))}. Each line of a plot is "
        "one round: A's session median to B's, red where B was slower in that round.</p>"
        + "".join(sections)
        + "</body></html>\n"
    )
