"""The HTML latency plot in headless Chromium: the warm samples keep their own scale, and a cold
start beyond them is marked off that scale instead of stretching the axis to reach it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ondevice_farm.reports.html import render_html
from ondevice_farm.reports.svg import LABEL_W, PLOT_W
from tests.report.chromium import CHROMIUM, open_page
from tests.report.conftest import TINYNET

pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium")

BUSY_HOST_RUN = Path(__file__).parent / "fixtures" / "host" / "tinynet_busy_host.json"
#: the latency plot is the report's first plot
PLOT = "document.querySelector('svg.plot')"
PROBES = {
    "label": f"{PLOT}.getAttribute('aria-label')",
    "ticks": f"Array.from({PLOT}.querySelectorAll('text.tick')).map(t => t.textContent)",
    "box_width": f"{PLOT}.querySelector('rect.box').getBBox().width",
    "off_scale_x": f"Array.from({PLOT}.querySelectorAll('path.off-scale')).map(p => p.getBBox().x)",
    "sample_x": f"Array.from({PLOT}.querySelectorAll('circle.sample')).map(c => c.getBBox().x)",
}


def test_cold_start_off_the_warm_scale(artifacts: Path, tmp_path: Path) -> None:
    run = json.loads(BUSY_HOST_RUN.read_text())
    job = run["jobs"][0]
    cold, warm = job["first_inference_ms"], job["latency_ms"]["samples"]
    assert cold > max(warm)  # what this recording is kept for
    page = tmp_path / "busy.html"
    page.write_text(render_html(run, model_path=TINYNET))
    result = open_page(page, PROBES, screenshot=artifacts / "report-latency-busy-host.png")
    assert result.console_errors == []
    values = result.values
    assert values["label"] == "latency distribution per job"
    axis_ticks = [float(t) for t in values["ticks"] if re.fullmatch(r"[0-9.]+", t)]
    assert max(axis_ticks) < cold  # the axis ends with the warm samples
    assert f"{cold:.3g} ms" in values["ticks"]  # the cold start, by value, off the scale
    assert len(values["off_scale_x"]) == 1 and values["off_scale_x"][0] > LABEL_W + PLOT_W
    assert all(LABEL_W - 3 <= x <= LABEL_W + PLOT_W for x in values["sample_x"])
    assert values["box_width"] > 5  # the quartile box is drawn, not a sliver of a pixel
