"""The HTML report opened in headless Chromium: it renders, the plots are there, nothing is logged
as an error; screenshots are kept under test-artifacts/ for a person to look at."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ondevice_farm.reports.html import render_html
from ondevice_farm.run_reader import load_run
from ondevice_farm.store import ResultsStore
from tests.report.chromium import CHROMIUM, open_page
from tests.report.conftest import TINYNET, HostRuns
from tests.report.recorded import conv_resize_model, nnapi_resize_job, run_of

pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium")

PROBES = {
    "title": "document.querySelector('h1').textContent",
    "plots": "document.querySelectorAll('svg.plot').length",
    "marks": "document.querySelectorAll('svg.plot rect, svg.plot circle, svg.plot path').length",
    "findings": "document.querySelectorAll('ol.findings li').length",
    "sections": "Array.from(document.querySelectorAll('section h2')).map(h => h.textContent)",
    "width": "document.documentElement.scrollWidth",
    "sorted": "(function () { var th = document.querySelector('th[data-sort]'); if (!th) return 'none';"
    " th.click(); return th.getAttribute('data-dir'); })()",
}


def test_host_runs_report_renders(host_runs: HostRuns, artifacts: Path, tmp_path: Path) -> None:
    with ResultsStore(host_runs.home / "results.sqlite") as store:
        first = load_run(store, host_runs.first["run_id"])
        second = load_run(store, host_runs.second["run_id"])
    page = tmp_path / "host.html"
    page.write_text(render_html(first, second, model_path=TINYNET))
    result = open_page(page, PROBES, screenshot=artifacts / "report-host-runs.png")
    assert result.console_errors == []
    values = result.values
    assert values["title"].startswith("farm report: tinynet")
    # latency, per-op time by backend, placement map, numeric error per output
    assert values["plots"] == 4 and values["marks"] > 100
    assert values["sections"][:3] == ["Why they differ", "Side by side", "Latency distribution"]
    assert values["width"] <= 1280  # nothing overflows the page sideways
    assert (artifacts / "report-host-runs.png").stat().st_size > 10_000


def test_recorded_nnapi_report_renders(artifacts: Path, tmp_path: Path) -> None:
    model = conv_resize_model(tmp_path / "conv_resize.onnx")
    page = tmp_path / "nnapi.html"
    page.write_text(render_html(run_of(nnapi_resize_job()), model_path=model))
    result = open_page(page, PROBES, screenshot=artifacts / "report-recorded-nnapi.png")
    assert result.console_errors == []
    assert result.values["findings"] == 2 and result.values["plots"] == 1  # only the placement map has data
    assert result.values["sorted"] == "asc"  # the one script works: clicking a header sorts


def test_console_errors_are_caught(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>console.error('probe'); undefined_call();</script></body></html>")
    assert len(open_page(page, {}).console_errors) == 2
