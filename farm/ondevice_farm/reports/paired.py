"""A compare's verdicts for people: the terminal table, a pull-request comment, an HTML page with
a paired plot (one line per round from A's p50 to B's, so a shared drift shows as parallel lines)."""

from __future__ import annotations

import html
from typing import Any

from rich.console import Console
from rich.table import Table

COLOURS = {"slower": "bold red", "faster": "green", "same": "cyan", "inconclusive": "yellow", "failed": "red"}


def _interval(c: dict[str, Any]) -> str:
    lo, hi = c["interval"]
    return f"{c['ratio']:.3f} [{lo:.3f}, {hi:.3f}]"


def _first(c: dict[str, Any]) -> str:
    return f"A {c['first']['A']} / B {c['first']['B']}"


def _to_decide(c: dict[str, Any]) -> str:
    """What budget would decide an inconclusive pair, in words."""
    need = c.get("to_decide") or {}
    if need.get("rounds") is None:
        return "the ratio sits on the --min-effect boundary: no affordable number of rounds decides it"
    return (
        f"about {need['rounds']} rounds (~{need['device_time_s'] / 60:.1f} min of device time) "
        "would decide it at this spread: raise --max-rounds/--budget"
    )


def print_compare(document: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    a, b = document["baseline"], document["candidate"]
    console.print(f"A: {a['name']} ({a['source']})   B: {b['name']} ({b['source']})")
    table = Table(show_header=True, header_style="bold")
    for column in (
        "device",
        "target",
        "A p50 ms",
        "B p50 ms",
        "B/A [interval]",
        "rounds",
        "first",
        "verdict",
    ):
        table.add_column(column)
    for c in document["comparisons"]:
        if c["status"] != "ok":
            table.add_row(c["requested"], c["target"], "", "", "", "", "", f"[red]failed[/red]: {c['error']}")
            continue
        colour = COLOURS[c["verdict"]]
        table.add_row(
            c["requested"],
            c["target"],
            f"{c['baseline_p50_ms']:.3f}",
            f"{c['candidate_p50_ms']:.3f}",
            _interval(c),
            f"{c['rounds']} ({c['stopped']})",
            _first(c),
            f"[{colour}]{c['verdict']}[/{colour}]",
        )
    console.print(table)
    settings = document["settings"]
    console.print(
        f"[dim]{settings['method']}; {1 - settings['alpha']:.0%} family-wise "
        f"(alpha {settings['alpha_per_pair']:.2g} per pair), same = inside +/-{settings['min_effect']:.0%}; "
        f"threads {settings['threads'] or 'default'}, pin {settings['pin']}; latencies measured[/dim]"
    )
    for c in document["comparisons"]:
        if c["status"] == "ok" and c["verdict"] == "inconclusive":
            console.print(f"{c['requested']} {c['target']}: inconclusive; {_to_decide(c)}")


def compare_markdown(document: dict[str, Any]) -> str:
    a, b = document["baseline"], document["candidate"]
    lines = [
        f"### farm compare: `{b['name']}` (B) against `{a['name']}` (A)",
        "",
        "| device | target | A p50 ms | B p50 ms | B/A | interval | rounds | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in document["comparisons"]:
        if c["status"] != "ok":
            lines.append(f"| {c['requested']} | {c['target']} | | | | | | failed: {c['error']} |")
            continue
        lo, hi = c["interval"]
        mark = {"slower": "**slower**", "faster": "faster"}.get(c["verdict"], c["verdict"])
        lines.append(
            f"| {c['requested']} | {c['target']} | {c['baseline_p50_ms']:.3f} | {c['candidate_p50_ms']:.3f} "
            f"| {c['ratio']:.3f} | [{lo:.3f}, {hi:.3f}] | {c['rounds']} | {mark} |"
        )
    settings = document["settings"]
    lines += [
        "",
        f"A and B measured interleaved in random order on the same unit; {settings['method']}; "
        f"same = inside ±{settings['min_effect']:.0%}. Latencies measured.",
    ]
    for c in document["comparisons"]:
        if c["status"] == "ok" and c["verdict"] == "inconclusive":
            lines.append(f"- {c['requested']} {c['target']}: inconclusive; {_to_decide(c)}")
    return "\n".join(lines) + "\n"


def _paired_svg(c: dict[str, Any]) -> str:
    return paired_svg(c["round_details"], "baseline_p50_ms", "candidate_p50_ms", "ms")


def paired_svg(
    rounds: list[dict[str, Any]],
    a_key: str,
    b_key: str,
    unit: str,
    *,
    higher_is_slower: bool = True,
    width: int = 360,
    height: int = 260,
) -> str:
    """One line per round from A's figure (`a_key`) to B's, red where B was slower in that round."""
    values = [r[a_key] for r in rounds] + [r[b_key] for r in rounds]
    low, high = min(values), max(values)
    span = (high - low) or max(high * 0.01, 1e-6)
    low, high = low - span * 0.08, high + span * 0.08
    top, bottom, left, right = 20, height - 30, 70, width - 70

    def y(v: float) -> float:
        return float(bottom - (v - low) / (high - low) * (bottom - top))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="paired plot of {len(rounds)} rounds">',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{right}" y1="{top}" x2="{right}" y2="{bottom}" stroke="#999"/>',
        f'<text x="{left}" y="{height - 10}" text-anchor="middle">A</text>',
        f'<text x="{right}" y="{height - 10}" text-anchor="middle">B</text>',
        f'<text x="{left - 6}" y="{y(high) + 4:.1f}" text-anchor="end" font-size="11">'
        f"{high:.3f} {unit}</text>",
        f'<text x="{left - 6}" y="{y(low):.1f}" text-anchor="end" font-size="11">{low:.3f} {unit}</text>',
    ]
    for r in rounds:
        a, b = r[a_key], r[b_key]
        colour = "#c0392b" if (b > a) == higher_is_slower else "#2471a3"
        parts.append(
            f'<line class="round" x1="{left}" y1="{y(a):.1f}" x2="{right}" y2="{y(b):.1f}" '
            f'stroke="{colour}" stroke-opacity="0.6">'
            f"<title>{r['order']}: {a:.3f} -> {b:.3f} {unit}</title></line>"
        )
    parts.append("</svg>")
    return "".join(parts)


def compare_html(document: dict[str, Any]) -> str:
    a, b = document["baseline"], document["candidate"]
    title = f"farm compare: {b['name']} against {a['name']}"
    sections = []
    for c in document["comparisons"]:
        head = f"{html.escape(c['requested'])} {html.escape(c['target'])}"
        if c["status"] != "ok":
            sections.append(
                f"<section><h2>{head}</h2><p>failed: {html.escape(str(c['error']))}</p></section>"
            )
            continue
        lo, hi = c["interval"]
        note = f"<p>{html.escape(_to_decide(c))}</p>" if c["verdict"] == "inconclusive" else ""
        sections.append(
            f'<section><h2>{head}: <span class="verdict {c["verdict"]}">{c["verdict"]}</span></h2>'
            f"<p>B/A {c['ratio']:.3f}, interval [{lo:.3f}, {hi:.3f}] at level {c['level']:.6f}; "
            f"A p50 {c['baseline_p50_ms']:.3f} ms, B p50 {c['candidate_p50_ms']:.3f} ms (measured); "
            f"{c['rounds']} rounds ({c['stopped']}), A first in {c['first']['A']}, B first in "
            f"{c['first']['B']}; anytime p-value {c['p_value']:.3g}; unit {html.escape(str(c.get('unit')))}; "
            f"controls: {html.escape(', '.join(f'{k} {v}' for k, v in c['settings'].items()))}</p>"
            f"{note}{_paired_svg(c)}</section>"
        )
    settings = document["settings"]
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        ".slower{color:#c0392b}.faster{color:#1e8449}.same{color:#2471a3}.inconclusive{color:#b9770e}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>A: {html.escape(a['source'])} ({a['sha256'][:12]}); B: {html.escape(b['source'])} "
        f"({b['sha256'][:12]}). {html.escape(settings['method'])}; same = inside "
        f"±{settings['min_effect']:.0%}. Each line of a plot is one round: A's session p50 to B's.</p>"
        + "".join(sections)
        + "</body></html>\n"
    )
