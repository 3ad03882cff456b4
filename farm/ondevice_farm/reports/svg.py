"""The report's plots as inline SVG strings: no plotting library, nothing fetched at view time.

Each function takes plain numbers and returns one `<svg>` element with a `<title>` tooltip on
every mark, so the plot stays readable in any browser, with or without JavaScript."""

from __future__ import annotations

import math
from html import escape

#: backend -> colour; CPU is the warm colour so fallbacks stand out next to accelerators
BACKEND_COLOURS = {
    "CPU": "#e07a5f",
    "NNAPI": "#3d85c6",
    "XNNPACK": "#81b29a",
    "QNN": "#9b5de5",
    "CoreML": "#2a9d8f",
    "ANE": "#2a9d8f",
    "GPU": "#e9c46a",
    "CUDA": "#76b041",
}
EXTRA_COLOURS = ("#f4a261", "#6d597a", "#457b9d", "#b5838d", "#588157")
UNKNOWN_COLOUR = "#c8c8c8"
LABEL_W = 230
PLOT_W = 560
ROW_H = 26
#: latency values spread wider than this (max/min) are drawn on a log axis
LOG_SCALE_RATIO = 20.0


def backend_colour(backend: str, others: dict[str, str] | None = None) -> str:
    if backend in BACKEND_COLOURS:
        return BACKEND_COLOURS[backend]
    if not backend or backend == "?":
        return UNKNOWN_COLOUR
    table = others if others is not None else {}
    if backend not in table:
        table[backend] = EXTRA_COLOURS[len(table) % len(EXTRA_COLOURS)]
    return table[backend]


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" role="img" aria-label="{escape(label)}" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">'
        + "".join(body)
        + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>{escape(text)}</text>'


def _nice_ticks(high: float, count: int = 5) -> list[float]:
    if high <= 0:
        return [0.0]
    step = 10 ** math.floor(math.log10(high / count))
    for factor in (1, 2, 2.5, 5, 10):
        if high / (step * factor) <= count:
            step *= factor
            break
    return [i * step for i in range(int(high / step) + 2) if i * step <= high * 1.0001 + step]


def _axis(scale_max: float, top: float, height: float, unit: str) -> list[str]:
    body = []
    for tick in _nice_ticks(scale_max):
        x = LABEL_W + PLOT_W * tick / scale_max
        if x > LABEL_W + PLOT_W + 1:
            continue
        body.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{top + height:.1f}"/>')
        body.append(_text(x, top + height + 14, f"{tick:g}", "middle", "tick"))
    body.append(_text(LABEL_W + PLOT_W, top + height + 28, unit, "end", "tick"))
    return body


def _quantile(sorted_values: list[float], q: float) -> float:
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


#: room right of the plot for a cold start that lies off the warm samples' scale
OFFSCALE_W = 110


def _diamond(cx: float, mid: float, cls: str, title: str) -> str:
    return (
        f'<path class="{cls}" d="M{cx:.1f} {mid - 6:.1f} L{cx + 5:.1f} {mid:.1f} L{cx:.1f} {mid + 6:.1f} '
        f'L{cx - 5:.1f} {mid:.1f} Z"><title>{escape(title)}</title></path>'
    )


def latency_plot(rows: list[tuple[str, list[float], float | None]]) -> str:
    """Per row (label, warm samples ms, cold first-inference ms): a box (quartiles), whiskers
    (min-max), every sample as a dot, and the cold run as a diamond.

    The axis is the warm samples' own: a cold start many times slower would squash them into a
    sliver. A cold start inside the axis is drawn on it; one beyond it sits right of the plot,
    past a break, with its value written beside it."""
    top = 10.0
    height = ROW_H * len(rows)
    values = [v for _, samples, _ in rows for v in samples if v > 0]
    low, high = min(values, default=0.1), max(values, default=1.0)
    if high / low > LOG_SCALE_RATIO:
        # warm samples themselves spread wider than a linear axis can show: a log axis
        nice = [
            m * 10.0**e
            for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
            for m in (1, 2, 5)
        ]
        lo_log = math.log10(max(t for t in nice if t <= low))
        hi_log = math.log10(min(t for t in nice if t >= high))
        span = max(hi_log - lo_log, 1e-9)
        axis_max = 10.0**hi_log

        def x(value: float) -> float:
            return LABEL_W + PLOT_W * (math.log10(max(value, 10.0**lo_log)) - lo_log) / span

        body: list[str] = []
        for tick in (t for t in nice if lo_log - 1e-9 <= math.log10(t) <= hi_log + 1e-9):
            body.append(
                f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{top:.1f}" '
                f'y2="{top + height:.1f}"/>'
            )
            body.append(_text(x(tick), top + height + 14, f"{tick:g}", "middle", "tick"))
        body.append(_text(LABEL_W + PLOT_W, top + height + 28, "ms (log scale)", "end", "tick"))
    else:
        axis_max = high * 1.05

        def x(value: float) -> float:
            return LABEL_W + PLOT_W * value / axis_max

        body = _axis(axis_max, top, height, "ms")

    off_scale = [cold for _, _, cold in rows if cold and cold > axis_max]
    if off_scale:
        edge = LABEL_W + PLOT_W + 10
        body.append(
            f'<line class="break" x1="{edge:.1f}" x2="{edge:.1f}" y1="{top:.1f}" y2="{top + height:.1f}" '
            'stroke="#8a8a8a" stroke-dasharray="3 3"/>'
        )
        body.append(_text(edge + 4, top + height + 14, "cold, off scale", "start", "tick"))

    for index, (label, samples, cold) in enumerate(rows):
        mid = top + ROW_H * index + ROW_H / 2
        body.append(_text(LABEL_W - 8, mid + 4, label, "end", "label"))
        if samples:
            s = sorted(samples)
            q1, q2, q3 = (_quantile(s, q) for q in (0.25, 0.5, 0.75))
            body.append(
                f'<line class="whisker" x1="{x(s[0]):.1f}" x2="{x(s[-1]):.1f}" y1="{mid:.1f}" '
                f'y2="{mid:.1f}"/>'
            )
            body.append(
                f'<rect class="box" x="{x(q1):.1f}" y="{mid - 7:.1f}" width="{max(1.0, x(q3) - x(q1)):.1f}" '
                f'height="14"><title>{escape(label)}: p25 {q1:.3f} / p50 {q2:.3f} / p75 {q3:.3f} ms '
                f"({len(s)} samples)</title></rect>"
            )
            body.append(
                f'<line class="median" x1="{x(q2):.1f}" x2="{x(q2):.1f}" y1="{mid - 7:.1f}" '
                f'y2="{mid + 7:.1f}"/>'
            )
            for i, value in enumerate(samples):
                jitter = ((i * 7919) % 9 - 4) * 1.1
                body.append(
                    f'<circle class="sample" cx="{x(value):.1f}" cy="{mid + jitter:.1f}" r="1.8">'
                    f"<title>{value:.3f} ms</title></circle>"
                )
        if cold and cold <= axis_max:
            body.append(_diamond(x(cold), mid, "cold", f"first inference (cold): {cold:.3f} ms"))
        elif cold:
            cx = LABEL_W + PLOT_W + 22
            body.append(
                _diamond(
                    cx, mid, "cold off-scale", f"first inference (cold): {cold:.3f} ms, off the warm scale"
                )
            )
            body.append(_text(cx + 9, mid + 4, f"{cold:.3g} ms", "start", "tick"))
    width = LABEL_W + PLOT_W + (OFFSCALE_W if off_scale else 20)
    return _svg(width, top + height + 34, body, "latency distribution per job")


def _legend(colours: dict[str, str], y: float) -> list[str]:
    """One swatch and name per backend, left to right under the plot."""
    items: list[str] = []
    x = LABEL_W
    for backend, colour in sorted(colours.items()):
        items.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" fill="{colour}"/>')
        items.append(_text(x + 16, y, backend, cls="tick"))
        x += 24 + 8 * len(backend)
    return items


def stacked_ops_plot(rows: list[tuple[str, list[tuple[str, str, float]]]]) -> str:
    """Per row (label, [(op name, backend, mean us)] in execution order): one bar of the ops laid
    end to end, each coloured by the backend that ran it; a legend of backends below."""
    top = 10.0
    others: dict[str, str] = {}
    totals = [sum(t for _, _, t in ops) for _, ops in rows]
    scale_max = max(totals, default=1.0) / 1000 * 1.05 or 1.0
    body: list[str] = _axis(scale_max, top, ROW_H * len(rows), "ms of op time per inference")
    seen: dict[str, str] = {}
    for index, (label, ops) in enumerate(rows):
        y = top + ROW_H * index + 5
        body.append(_text(LABEL_W - 8, y + 12, label, "end", "label"))
        offset = 0.0
        for name, backend, us in ops:
            colour = backend_colour(backend, others)
            seen.setdefault(backend, colour)
            width = PLOT_W * us / 1000 / scale_max
            body.append(
                f'<rect class="op" x="{LABEL_W + offset:.2f}" y="{y:.1f}" width="{width:.2f}" height="16" '
                f'fill="{colour}" stroke="#ffffff" stroke-width="0.6"><title>{escape(name)} on '
                f"{escape(backend)}: {us:.1f} us</title></rect>"
            )
            offset += width
    legend_y = top + ROW_H * len(rows) + 44
    body.extend(_legend(seen, legend_y))
    return _svg(LABEL_W + PLOT_W + 20, legend_y + 10, body, "per-op time stacked by backend")


def placement_map(node_names: list[str], rows: list[tuple[str, list[tuple[str, str]]]]) -> str:
    """A strip per row, one cell per source node in graph order, coloured by the backend that ran
    it (grey where unknown, faded where the mapping is a guess)."""
    top = 10.0
    others: dict[str, str] = {}
    count = max(len(node_names), 1)
    cell = PLOT_W / count
    body: list[str] = []
    seen: dict[str, str] = {}
    for index, (label, cells) in enumerate(rows):
        y = top + ROW_H * index + 4
        body.append(_text(LABEL_W - 8, y + 13, label, "end", "label"))
        for position, (backend, certainty) in enumerate(cells):
            colour = backend_colour(backend, others) if backend else UNKNOWN_COLOUR
            if backend:
                seen.setdefault(backend, colour)
            opacity = "0.45" if certainty in ("uncertain", "partition") else "1"
            node = node_names[position] if position < len(node_names) else "?"
            body.append(
                f'<rect class="node" x="{LABEL_W + position * cell:.2f}" y="{y:.1f}" '
                f'width="{max(cell - 0.6, 0.6):.2f}" height="18" fill="{colour}" fill-opacity="{opacity}">'
                f"<title>{escape(node)}: {escape(backend or 'not profiled')} "
                f"({escape(certainty)})</title></rect>"
            )
    legend_y = top + ROW_H * len(rows) + 18
    body.extend(_legend(seen, legend_y))
    body.append(
        _text(
            LABEL_W + PLOT_W,
            legend_y + 16,
            f"{count} source nodes in graph order; faded: inferred",
            "end",
            "tick",
        )
    )
    return _svg(LABEL_W + PLOT_W + 20, legend_y + 24, body, "placement map of source ops by backend")


def snr_plot(outputs: list[str], rows: list[tuple[str, list[float | None]]], cap_db: float = 140.0) -> str:
    """Grouped bars: per output, one bar per row of its SNR against the reference (dB; higher is
    closer; bars at the cap are bit-exact or nearly so)."""
    top = 10.0
    others: dict[str, str] = {}
    group_h = ROW_H * max(len(rows), 1) * 0.7 + 12
    body: list[str] = _axis(cap_db, top, group_h * len(outputs), "SNR vs reference, dB (higher is closer)")
    palette = [backend_colour(f"row{i}", others) for i in range(len(rows))]
    for g, output in enumerate(outputs):
        y0 = top + g * group_h
        body.append(_text(LABEL_W - 8, y0 + 14, output, "end", "label"))
        for r, (label, values) in enumerate(rows):
            value = values[g] if g < len(values) else None
            y = y0 + 4 + r * ROW_H * 0.7
            if value is None:
                body.append(_text(LABEL_W + 4, y + 11, f"{label}: n/a", cls="tick"))
                continue
            width = PLOT_W * max(0.0, min(value, cap_db)) / cap_db
            body.append(
                f'<rect class="bar" x="{LABEL_W}" y="{y:.1f}" width="{width:.1f}" '
                f'height="{ROW_H * 0.55:.1f}" '
                f'fill="{palette[r]}"><title>{escape(label)} {escape(output)}: {value:.1f} dB</title></rect>'
            )
            body.append(_text(LABEL_W + width + 4, y + 11, f"{label} {value:.1f} dB", cls="tick"))
    return _svg(LABEL_W + PLOT_W + 200, top + group_h * len(outputs) + 34, body, "numeric error per output")
