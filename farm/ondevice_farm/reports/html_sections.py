"""The sections of the HTML report, each a function of the report returning an HTML fragment:
plain tables (readable without JavaScript) and inline SVG plots."""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import Any

from ondevice_farm.analysis.reference_state import FAILED, PASSED, reference_state
from ondevice_farm.op_rows import op_statistic_label, op_time_us
from ondevice_farm.reports import svg
from ondevice_farm.reports.alignment import describe
from ondevice_farm.reports.compare import Column, backend_name, fusion_differences
from ondevice_farm.reports.document import Report
from ondevice_farm.reports.provenance import (
    LEGEND,
    op_times_estimated,
    placement_mark,
    time_caveat,
    time_mark,
)
from ondevice_farm.reports.provenance import describe as describe_provenance


def css() -> str:
    stylesheet = resources.files("ondevice_farm.reports").joinpath("static", "report.css")
    return stylesheet.read_text(encoding="utf-8")


def _num(value: Any, digits: int = 3, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.0f}"
    else:
        text = str(value)
    return text + unit


def e(value: Any) -> str:
    return escape(str(value))


def _scroll(html: str) -> str:
    return f'<div class="scroll">{html}</div>'


def _table(
    head: list[str],
    rows: list[list[str]],
    cls: str = "",
    numeric: set[int] | None = None,
    sortable: bool = False,
) -> str:
    numeric = numeric or set()
    cells = "".join(
        f"<th{' class=num' if i in numeric else ''}{' data-sort' if sortable else ''}>{h}</th>"
        for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i in numeric else ''}>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return _scroll(f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>')


def _swatch(backend: str) -> str:
    return f'<span class="swatch" style="background:{svg.backend_colour(backend)}"></span>{e(backend)}'


def _fallback_summary(column: Column) -> str:
    if not column.fallbacks:
        return "0"
    share = column.fallback_share()
    cost = "cost not recorded" if share is None else f"{share * 100:.1f}% of op time"
    return f"{len(column.fallbacks)} ({cost})"


def _warm_load(column: Column) -> str:
    """The warm load with how it was obtained (a second session, or a second perf_test process)."""
    warm = column.job.get("warm_load_ms")
    if warm is None:
        return "-"
    # documents stored before warm_load_method existed measured it in the same process
    method = column.job.get("warm_load_method") or "second session in the same process"
    return f'{_num(warm, 1)} <span class="muted">({e(method)})</span>'


def _delegation_cell(column: Column) -> str:
    """A runtime with a delegate: the nodes it took and those left on the runtime's own kernels."""
    counts = column.delegation()
    if counts is None:
        return "-"
    kernels = (column.compile.get("extra") or {}).get("fallback_kernels") or "fallback"
    return f'{counts[0]} / {counts[1]} <span class="muted">({e(kernels)})</span>'


def _artifact_cell(column: Column) -> str:
    size = column.artifact_bytes
    return "-" if size is None else _num(size / 1024, 1)


def side_by_side(columns: list[Column]) -> str:
    """Metrics down, jobs across: the first table a reader compares."""
    groups: list[tuple[str, list[tuple[str, Any]]]] = []

    def per(fn: Any) -> list[str]:
        return [fn(c) if c.ok else "-" for c in columns]

    def worst(c: Column, key: str) -> float | None:
        values = [float(o[key]) for o in c.outputs().values() if o.get(key) is not None]
        if not values:
            return None
        return min(values) if key in ("snr_db", "cosine") else max(values)

    groups.append(
        (
            "latency (warm)",
            [
                ("p50 ms", per(lambda c: _num(c.latency.get("p50")))),
                ("p90 ms", per(lambda c: _num(c.latency.get("p90")))),
                ("p99 ms", per(lambda c: _num(c.latency.get("p99")))),
                ("mean ms", per(lambda c: _num(c.latency.get("mean")))),
                (
                    "min / max ms",
                    per(lambda c: f"{_num(c.latency.get('min'))} / {_num(c.latency.get('max'))}"),
                ),
                ("cv", per(lambda c: _num(c.latency.get("cv")))),
                ("samples", per(lambda c: str(len(c.samples_ms)) if c.samples_ms else "-")),
            ],
        )
    )
    groups.append(
        (
            "cold start and memory",
            [
                ("first inference ms", per(lambda c: _num(c.job.get("first_inference_ms")))),
                ("load ms", per(lambda c: _num(c.job.get("load_ms"), 1))),
                ("warm load ms", per(_warm_load)),
                ("peak memory MB", per(lambda c: _num(c.job.get("peak_memory_mb"), 1))),
            ],
        )
    )
    groups.append(
        (
            "compile and placement",
            [
                (
                    "nodes before -> after",
                    per(
                        lambda c: (
                            f"{_num(c.compile.get('nodes_before'))} -> {_num(c.compile.get('nodes_after'))}"
                        )
                    ),
                ),
                ("precision", per(lambda c: e(c.precision or "-"))),
                ("partitions", per(lambda c: _num(c.compile.get("partitions")))),
                (
                    "kernels per backend",
                    per(lambda c: ", ".join(f"{_swatch(k)} {v}" for k, v in c.placement().items()) or "-"),
                ),
                ("CPU fallbacks", per(lambda c: _fallback_summary(c))),
                ("delegated / fallback nodes", per(_delegation_cell)),
                ("artifact KiB", per(_artifact_cell)),
            ],
        )
    )
    groups.append(
        (
            "numerics vs host reference",
            [
                (
                    "check",
                    per(_check_cell),
                ),
                ("worst SNR dB", per(lambda c: _num(worst(c, "snr_db"), 1))),
                (
                    "worst max |err|",
                    per(lambda c: "-" if worst(c, "max_abs") is None else f"{worst(c, 'max_abs'):.2e}"),
                ),
                ("worst cosine", per(lambda c: _num(worst(c, "cosine"), 6))),
            ],
        )
    )
    head = "<th>metric</th>" + "".join(
        f'<th class="num">{e(c.label)}<br><span class="tag">{e(c.job.get("runner") or "")}</span></th>'
        for c in columns
    )
    body = ""
    for title, rows in groups:
        body += f'<tr class="group"><th colspan="{len(columns) + 1}">{e(title)}</th></tr>'
        for name, values in rows:
            body += f"<tr><th>{e(name)}</th>" + "".join(f'<td class="num">{v}</td>' for v in values) + "</tr>"
    status = "".join(
        f'<td class="num fail">failed: {e(c.error or "")}</td>' if not c.ok else '<td class="num">ok</td>'
        for c in columns
    )
    body = f"<tr><th>status</th>{status}</tr>" + body
    return _scroll(f'<table class="side"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def findings(report: Report) -> str:
    if not report.findings:
        return '<p class="muted">No rule found a difference worth naming.</p>'
    items = "".join(f'<li>{e(f.text)}<span class="rule">{e(f.rule)}</span></li>' for f in report.findings)
    return f'<ol class="findings">{items}</ol>'


NOT_RECORDED = '<p class="muted">{what}: not recorded by {who}.</p>'


def _not_recorded(what: str, columns: list[Column]) -> str:
    if not columns:
        return ""
    return NOT_RECORDED.format(what=escape(what), who=escape(", ".join(c.label for c in columns)))


def latency(columns: list[Column]) -> str:
    ok = [c for c in columns if c.ok]
    timed = [c for c in ok if c.samples_ms]
    missing = _not_recorded("Latency samples", [c for c in ok if not c.samples_ms])
    if not timed:
        return missing
    rows = [(c.label, c.samples_ms, c.job.get("first_inference_ms")) for c in timed]
    return (
        missing
        + svg.latency_plot(rows)
        + (
            '<p class="muted">Box: quartiles of the warm samples; line: median; '
            "dots: every sample; diamond: the first (cold) inference, right of the dashed break "
            "with its value where it lies off the warm samples' scale.</p>"
        )
    )


def compile(columns: list[Column]) -> str:
    ok = [c for c in columns if c.ok and c.compile]
    types = sorted(
        {
            t
            for c in ok
            for t in list(c.compile.get("op_types_before") or {})
            + list(c.compile.get("op_types_after") or {})
        }
    )
    if not types:
        return _not_recorded("Op types before and after compiling", ok)
    differing = {t for t, _, _ in fusion_differences(columns)}
    rows = []
    for op_type in types:
        cells = []
        for c in ok:
            before = int((c.compile.get("op_types_before") or {}).get(op_type, 0))
            after = int((c.compile.get("op_types_after") or {}).get(op_type, 0))
            cells.append(f"{before} -> {after}" if before != after else str(after))
        name = f'<span class="fused">{e(op_type)}</span>' if op_type in differing else e(op_type)
        rows.append([name, *cells])
    table = _table(["op type", *[e(c.label) for c in ok]], rows, numeric=set(range(1, len(ok) + 1)))
    note = (
        '<p class="muted">Highlighted: op types a compiler created (a fusion) on some targets and not '
        "on others.</p>"
        if differing
        else ""
    )
    return table + note


def placement(report: Report) -> str:
    columns = [c for c in report.columns if c.ok]
    timed = [c for c in columns if any(op_time_us(op) is not None for op in c.ops)]
    parts = [_not_recorded("Per-op times", [c for c in columns if c not in timed])]
    parts += (
        []
        if not timed
        else [
            svg.stacked_ops_plot(
                [
                    (
                        c.label,
                        [
                            (
                                str(op["name"]),
                                backend_name(str(op.get("provider") or "?")),
                                op_time_us(op) or 0.0,
                            )
                            for op in c.ops
                            if op_time_us(op) is not None
                        ],
                    )
                    for c in timed
                ]
            )
        ]
    )
    estimated = [c.label + time_caveat(c.job) for c in timed if op_times_estimated(c.job)]
    if estimated:  # the plot draws estimated per-op times like measured ones: say which they are
        parts.append(
            f'<p class="muted"><span class="est">est.</span>not measured: {e("; ".join(estimated))}</p>'
        )
    if report.alignment is not None:
        names = [s.name for s in report.nodes]
        strips: list[tuple[str, list[tuple[str, str]]]] = []
        for c in columns:
            cells = {
                s.name: (cell.backend, cell.certainty)
                for row in report.alignment.rows
                for s in row.sources
                if (cell := row.cells.get(c.label)) is not None
            }
            strips.append((c.label, [cells.get(n, ("", "absent")) for n in names]))
        parts.append("<h3>Placement map: source ops by the backend that ran them</h3>")
        parts.append(svg.placement_map(names, strips))
    fallback_rows = [
        [
            e(c.label),
            e(f.name),
            e(f.op_type),
            "not recorded" if f.time_us is None else _num(f.time_us / 1000),
            "-" if f.share is None else f"{f.share * 100:.1f}%",
            _num(f.transfer_us / 1000) if f.transfer_ops else "-",
            e(", ".join(f.transfer_ops) or "-"),
        ]
        for c in columns
        for f in c.fallbacks
    ]
    parts.append("<h3>CPU fallbacks and their cost</h3>")
    parts.append(
        _table(
            ["job", "op", "op type", "ms", "share of op time", "transfer ms", "transfers"],
            fallback_rows,
            numeric={3, 4, 5},
            sortable=True,
        )
        if fallback_rows
        else '<p class="muted">No op fell back to the CPU on an accelerator target.</p>'
    )
    parts += [_slowest_kernels(c) for c in columns if c.ops]
    return "".join(parts)


def _slowest_kernels(column: Column) -> str:
    """The ten slowest kernels by the op table's statistic: the median per run, with the mean and
    the runs beside it, where the profile recorded its runs; one (estimated) figure otherwise."""
    top = sorted(column.ops, key=lambda o: -(op_time_us(o) or 0.0))[:10]
    by_median = op_statistic_label(column.ops) == "median"
    rows = []
    for o in top:
        row = [
            e(o["name"]),
            e(o.get("op_type", "")),
            _swatch(backend_name(str(o.get("provider") or "?"))) + e(placement_mark(o)),
            _marked_time(o),
        ]
        if by_median:
            row += [_num(float(o.get("mean_us") or 0) / 1000), e(str(o.get("runs") or "-"))]
        rows.append([*row, f"{float(o.get('share') or 0) * 100:.1f}%"])
    head = ["kernel", "op type", "backend"]
    head += ["median ms", "mean ms", "runs", "share of medians"] if by_median else ["ms", "share"]
    # open where the times are estimates: the "est." cells are what a reader must not miss
    return (
        f"<details{' open' if op_times_estimated(column.job) else ''}><summary>Slowest kernels on "
        f"{e(column.label)}{e(time_caveat(column.job))}</summary>"
        + _table(head, rows, numeric=set(range(3, len(head))))
        + "</details>"
    )


def _marked_time(op: dict[str, Any]) -> str:
    mark = time_mark(op)
    value = _num((op_time_us(op) or 0.0) / 1000)
    if not mark:
        return value
    return f'<span class="est" title="{e(op.get("time_source"))}: not measured">{e(mark)}</span>{value}'


def provenance(columns: list[Column]) -> str:
    """Per job, how each kind of figure was obtained, the legend of the marks, and the job's notes."""
    ok = [c for c in columns if c.ok]
    rows = [[e(c.label), e(what), e(how)] for c in ok for what, how in describe_provenance(c.job)]
    legend = "".join(f"<li><b>{e(mark)}</b>: {e(text)}</li>" for mark, text in LEGEND)
    parts = [
        '<div class="legend"><h3>Legend</h3><ul>' + legend + "</ul></div>",
        _table(["job", "figure", "how it was obtained"], rows) if rows else "",
    ]
    for c in columns:
        notes = [str(n) for n in c.job.get("notes") or []]
        if notes:
            items = "".join(f"<li>{e(n)}</li>" for n in notes)
            parts.append(f"<h3>Notes on {e(c.label)}</h3><ul class=notes>{items}</ul>")
    return "".join(parts)


def _check_cell(c: Column) -> str:
    state = reference_state(c.job)
    css_class = {PASSED: "pass", FAILED: "fail"}.get(state.state, "muted")
    title = f' title="{e(state.reason)}"' if state.reason else ""
    return f'<span class="{css_class}"{title}>{e(state.label)}</span>'


def alignment(report: Report) -> str:
    if report.alignment is None:
        return (
            '<p class="muted">The source model is not at the path the run recorded; pass '
            "<code>--model</code> to "
            "align source ops with what each target ran.</p>"
        )
    labels = [c.label for c in report.columns if c.ok]
    rows = []
    for row in report.alignment.rows:
        cells = []
        for label in labels:
            cell = row.cells.get(label)
            text = "-" if cell is None else e(describe(cell))
            if row.uncertain.get(label):
                text += f' <span class="tag">(uncertain: {e(", ".join(row.uncertain[label]))})</span>'
            cells.append(text)
        rows.append([e(row.title), e(" + ".join(s.op_type for s in row.sources)), *cells])
    table = _table(["source nodes", "op types", *[e(label) for label in labels]], rows)
    untraced = "".join(
        f"<p class=muted>{e(label)}: kernels not traced to a source node: "
        f"{e(', '.join(str(k['name']) for k in kernels))}</p>"
        for label, kernels in report.alignment.untraced.items()
    )
    return f"<details open><summary>{len(report.alignment.rows)} rows</summary>{table}</details>{untraced}"


def preflight(report: Report) -> str:
    if not report.preflight:
        return (
            '<p class="muted">No accelerator target with an operator table in this run (or no source model): '
            "nothing to check the prediction against.</p>"
        )
    rows = [
        [
            e(p.label),
            str(len(p.predicted)),
            str(len(p.observed)),
            e(", ".join(p.confirmed) or "-"),
            e(", ".join(p.describe_unexpected()) or "-"),
            e(", ".join(p.avoided) or "-"),
        ]
        for p in report.preflight
    ]
    return _table(
        ["job", "predicted on CPU", "ran on CPU", "confirmed", "not predicted", "predicted, yet accelerated"],
        rows,
        numeric={1, 2},
    )
