"""The HTML and JSON views of crafted runs: every section renders whatever the jobs hold."""

from __future__ import annotations

import json

from ondevice_farm.reports.document import build_report
from ondevice_farm.reports.html import render_html
from ondevice_farm.reports.trace import trace_document, validate_trace
from tests.report.crafted import job, run

NNAPI, CPU = "NnapiExecutionProvider", "CPUExecutionProvider"
OPS = [
    ("Conv_1", "Conv", NNAPI, 400.0),
    ("MemcpyToHost", "MemcpyToHost", CPU, 50.0),
    ("Resize_40", "Resize", CPU, 300.0),
    ("MemcpyFromHost", "MemcpyFromHost", CPU, 50.0),
]
FAILED = {
    "job_id": "f",
    "run_id": "run-a",
    "device": "pixel8",
    "target": "ort/qnn",
    "status": "failed",
    "error": "device <lost>",
    "error_type": "DeviceLostError",
}


def test_mixed_run_renders_every_section() -> None:
    document = run(
        job("pixel8", "ort/nnapi", ops=OPS, fallbacks=("Resize_40",)), job("host", "ort/cpu"), FAILED
    )
    html = render_html(document)
    assert "failed: device &lt;lost&gt;" in html  # escaped, not markup
    assert "Resize_40" in html and "0.100" in html  # the fallback row with its 0.1 ms of copies
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="plot"') == 3  # latency, op time, SNR
    report = build_report(document).to_dict()
    json.dumps(report)  # the JSON view holds only JSON types
    assert [c["status"] for c in report["columns"]] == ["ok", "ok", "failed"]
    assert report["findings"][0]["rule"] == "job_failed"
    assert validate_trace(trace_document(document["jobs"])) == []


def test_synthesised_trace_for_a_target_with_means_only() -> None:
    coreml = job(
        "iphone",
        "coreml/ane",
        ops=[("conv_0", "ios17.conv", "ANE", 80.0), ("cast", "ios17.cast", "CPU", 5.0)],
    )
    events = trace_document([coreml])["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in kernels] == [("conv_0", 0.0, 80.0), ("cast", 80.0, 5.0)]
    assert all(e["args"]["synthesised"] is True for e in kernels)
    assert len({e["tid"] for e in kernels}) == 2  # a lane per backend


def test_warm_samples_keep_their_own_scale_and_a_far_cold_start_is_marked_off_it() -> None:
    import re

    from ondevice_farm.reports.svg import LABEL_W, PLOT_W, latency_plot

    plot = latency_plot([("phone", [0.3, 0.4, 0.5], 15.0)])
    assert "log scale" not in plot
    ticks = [float(v) for v in re.findall(r'class="tick">([0-9.]+)</text>', plot)]
    assert max(ticks) <= 0.55  # the axis ends at the warm samples, not at the cold start
    boxes = re.findall(r'<rect class="box" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"', plot)
    assert float(boxes[0][1]) > PLOT_W / 6  # the quartile box is wide, not a sliver
    assert 'class="cold off-scale"' in plot and ">15 ms</text>" in plot and "off scale" in plot
    cold_x = float(re.search(r'class="cold off-scale" d="M([0-9.]+)', plot).group(1))  # type: ignore[union-attr]
    assert cold_x > LABEL_W + PLOT_W

    near = latency_plot([("phone", [0.3, 0.4, 0.5], 0.52)])
    assert 'class="cold"' in near and "off-scale" not in near and "off scale" not in near


def test_warm_samples_spread_wide_get_a_log_axis() -> None:
    from ondevice_farm.reports.svg import latency_plot

    wide = latency_plot([("phone", [0.3, 0.4, 0.5, 15.0], None)])
    assert (
        "ms (log scale)" in wide
        and ">0.2</text>" in wide
        and ">20</text>" in wide
        and ">50</text>" not in wide
    )


def test_warm_load_is_shown_with_how_it_was_obtained() -> None:
    """Crafted documents: a perf_test job (warm load from a second process), a host job (a second
    session in the same process), and one without a warm figure."""
    from ondevice_farm.reports.sustained_text import sustained_lines

    phone = {**job("pixel8", "ort/cpu"), "warm_load_ms": 41.5, "warm_load_method": "second process"}
    host = {
        **job("host", "ort/cpu"),
        "warm_load_ms": 7.25,
        "warm_load_method": "second session in the same process",
    }
    html = render_html(run(phone, host, job("ipad", "ort/cpu")))
    assert "warm load ms" in html
    assert '41.5 <span class="muted">(second process)</span>' in html
    assert '7.2 <span class="muted">(second session in the same process)</span>' in html
    columns = build_report(run(phone, host)).to_dict()["columns"]
    assert [(c["warm_load_ms"], c["warm_load_method"]) for c in columns] == [
        (41.5, "second process"),
        (7.25, "second session in the same process"),
    ]
    assert "41.5 ms warm (a second process)" in sustained_lines(phone).plain
