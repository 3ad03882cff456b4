"""The report as one self-contained HTML file: styles and the one small script inlined, plots as
inline SVG, every table plain HTML (readable with JavaScript off; the script only sorts tables)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ondevice_farm.reports import html_energy, html_generation, html_layers, html_numerics, html_sustained
from ondevice_farm.reports import html_sections as sections
from ondevice_farm.reports.document import Report, build_report
from ondevice_farm.reports.html_sections import e
from ondevice_farm.reports.job_groups import groups_html, window_note
from ondevice_farm.reports.subject import is_nightly, run_subject

PageLink = Callable[[int], str]

SORT_SCRIPT = """
document.querySelectorAll('th[data-sort]').forEach(function (th) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0], index = th.cellIndex;
    var asc = th.getAttribute('data-dir') !== 'asc';
    th.setAttribute('data-dir', asc ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute('data-v') || a.cells[index].textContent;
      var y = b.cells[index].getAttribute('data-v') || b.cells[index].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _jobs_section(run: dict[str, Any], page_link: PageLink | None) -> str | None:
    """The per-(model, target) table of every job, where the report's columns are a window of a
    larger run, with links to the next and previous windows (served) or how to ask for them."""
    how = (
        "the links page through them"
        if page_link is not None
        else "`farm report RUN --offset K --jobs N` shows others, as do `farm serve`'s /runs/ pages"
    )
    note = window_note(run, how)
    if note is None:
        return None
    lead = f"<p class=note>{e(note)}</p>"
    if page_link is not None:
        offset, shown = int(run.get("jobs_offset", 0)), max(1, len(run.get("jobs") or []))
        links = []
        if offset > 0:
            links.append(f'<a href="{e(page_link(max(0, offset - shown)))}">previous {shown}</a>')
        if offset + shown < int(run.get("jobs_total", 0)):
            links.append(f'<a href="{e(page_link(offset + shown))}">next {shown}</a>')
        lead += f"<p class=note>{' | '.join(links)}</p>"
    return groups_html(list(run.get("job_groups") or []), lead)


def render_report(report: Report, *, page_link: PageLink | None = None) -> str:
    """`page_link(offset)`: the address of the report of the run's jobs from `offset` (served by
    `farm serve`), for a run larger than the window of jobs the report shows."""
    run = report.comparison.run
    model = report.comparison.model
    against = report.comparison.against
    title = f"farm report: {run_subject(run)} (run {run.get('run_id', '?')})"
    facts = [e(run_subject(run)) if is_nightly(run) else f"model {e(model.get('name', '?'))}"]
    if model.get("sha256"):
        facts.append(f"sha256 {e(str(model['sha256'])[:12])}")
    if model.get("nodes") is not None:
        facts.append(f"{e(model['nodes'])} nodes, opset {e(model.get('opset', '?'))}")
    facts.append(f"run {e(run.get('run_id'))}")
    meta = ", ".join(facts)
    if against is not None:
        meta += f" against run {e(against.get('run_id'))}"
    parts = [
        ("findings", "Why they differ", sections.findings(report)),
        ("summary", "Side by side", sections.side_by_side(report.columns)),
        ("latency", "Latency distribution", sections.latency(report.columns)),
        ("placement", "Where the time goes", sections.placement(report)),
        ("provenance", "How each figure was obtained", sections.provenance(report.columns)),
        ("compile", "Compile: op types before -> after", sections.compile(report.columns)),
        ("numerics", "Numerics per output", html_numerics.numerics(report)),
        ("alignment", "Op-level alignment", sections.alignment(report)),
        ("preflight", "Pre-flight prediction vs the device", sections.preflight(report)),
    ]
    if html_sustained.has_sustained(report.columns):
        parts.insert(3, ("sustained", "Sustained load", html_sustained.sustained(report.columns)))
    if html_generation.has_generation(report.columns):
        parts.insert(2, ("generation", "Generation", html_generation.generation(report.columns)))
    if html_energy.has_energy(report.columns):
        parts.insert(3, ("energy", "Energy per inference", html_energy.energy(report.columns)))
    if report.layers is not None:
        after_numerics = [anchor for anchor, _, _ in parts].index("numerics") + 1
        parts.insert(
            after_numerics,
            ("layers", "Where drift starts", html_layers.layers(report.layers, report.layers_missing)),
        )
    jobs = _jobs_section(run, page_link)
    if jobs is not None:
        parts.insert(1, ("jobs", "Every job, per model and target", jobs))
    if model.get("source"):
        from ondevice_farm.reports.html_routes import routes_section

        parts.insert(2, ("routes", "One checkpoint, two CoreML routes", routes_section(model["source"])))
    nav = "".join(f'<a href="#{anchor}">{e(name)}</a>' for anchor, name, _ in parts)
    body = "".join(
        f'<section id="{anchor}"><h2>{e(name)}</h2>{html}</section>' for anchor, name, html in parts
    )
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = (
        f'<meta charset="utf-8"><title>{e(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{sections.css()}</style>"
    )
    footer = (
        f"<footer>Generated by farm on {generated}. Values come from the job documents in the "
        "store, each labelled with how it was obtained (measured, planned, est. = estimated, syn. = "
        "synthetic: see the legend); pre-flight and alignment are inferred and say so.</footer>"
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head>{head}</head><body><h1>{e(title)}</h1>'
        f"<p class=meta>{meta}</p><nav>{nav}</nav>{body}{footer}<script>{SORT_SCRIPT}</script></body></html>"
    )


def render_html(
    run_document: dict[str, Any],
    against: dict[str, Any] | None = None,
    model_path: Path | None = None,
    *,
    predict_precision: bool = True,
) -> str:
    """The HTML report of a stored run (`ondevice_farm.run_reader.load_run`), optionally against a second run.

    `predict_precision=False` skips the host fp16 prediction (seconds per report; a server may
    prefer to render without it)."""
    return render_report(
        build_report(run_document, against, model_path=model_path, predict_precision=predict_precision)
    )
