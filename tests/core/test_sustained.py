"""Sustained runs and warm start: the sysfs telemetry reader, the windowed loop on a real ONNX
Runtime session, the throttling summary, and `farm submit --sustained` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from ondevice_farm.analysis.sustained import sustained_document
from ondevice_farm.durations import parse_duration_s
from ondevice_farm.errors import UsageError
from ondevice_farm_agents.base import SustainedTrace, SustainedWindow, TelemetrySample
from ondevice_farm_agents.host.sustained import run_sustained
from ondevice_farm_agents.host.telemetry import HostTelemetry
from tests.core.conftest import EXAMPLE_MODEL, farm

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)


def _sysfs(root: Path, *, freq_khz: int, temp_milli: int, energy_uj: int) -> None:
    for cpu in ("cpu0", "cpu1"):
        (root / f"sys/devices/system/cpu/{cpu}/cpufreq").mkdir(parents=True, exist_ok=True)
        (root / f"sys/devices/system/cpu/{cpu}/cpufreq/scaling_cur_freq").write_text(f"{freq_khz}\n")
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("x86_pkg_temp\n")
    (zone / "temp").write_text(f"{temp_milli}\n")
    rapl = root / "sys/class/powercap/intel-rapl:0"
    rapl.mkdir(parents=True, exist_ok=True)
    (rapl / "energy_uj").write_text(f"{energy_uj}\n")
    (rapl / "max_energy_range_uj").write_text("1000000\n")


def test_host_telemetry_reads_sysfs_and_survives_a_counter_wrap(tmp_path: Path) -> None:
    _sysfs(tmp_path, freq_khz=2_400_000, temp_milli=51_500, energy_uj=999_000)
    reader = HostTelemetry(tmp_path)
    first = reader.read()
    assert first.cpu_freq_mhz == {"cpu0": 2400.0, "cpu1": 2400.0}
    assert first.temperatures_c == {"x86_pkg_temp": 51.5}
    assert first.energy_uj == 0.0  # energy since the reader was made
    _sysfs(tmp_path, freq_khz=1_800_000, temp_milli=70_000, energy_uj=4_000)  # wrapped at 1e6
    later = reader.read()
    assert later.energy_uj == pytest.approx(5_000.0)
    assert later.cpu_freq_mhz["cpu1"] == 1800.0 and later.temperatures_c["x86_pkg_temp"] == 70.0
    assert reader.unavailable() == []


def test_a_host_that_exposes_nothing_says_so(tmp_path: Path) -> None:
    reader = HostTelemetry(tmp_path)
    assert reader.read() == TelemetrySample()
    assert [m.split(" (")[0] for m in reader.unavailable()] == ["CPU frequency", "temperatures", "energy"]


def test_run_sustained_windows_a_real_session(tmp_path: Path) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(EXAMPLE_MODEL), providers=["CPUExecutionProvider"])
    spec = session.get_inputs()[0]
    feed = {spec.name: np.zeros([d if isinstance(d, int) else 1 for d in spec.shape], np.float32)}
    trace = run_sustained(lambda: session.run(None, feed), 1.2, 0.3, HostTelemetry(tmp_path).read)
    assert 3 <= len(trace.windows) <= 5
    for before, after in zip(trace.windows, trace.windows[1:], strict=False):
        assert before.end_s == after.start_s  # windows tile the run: no inference is lost
    assert all(w.samples_ms and min(w.samples_ms) > 0 for w in trace.windows)
    assert trace.windows[-1].end_s >= 1.2 - max(trace.windows[-1].samples_ms) / 1e3


def _window(start: float, p50: float, freq: float, status: str = "nominal") -> SustainedWindow:
    return SustainedWindow(
        start,
        start + 10,
        [p50 * f for f in (0.98, 1.0, 1.02)],
        TelemetrySample({"cpu0": freq}, {"soc": 40.0}, status),
    )


def test_the_summary_finds_the_first_throttle_and_its_signal() -> None:
    """Constructed windows (synthetic, not measured): the summary's arithmetic and rules only."""
    start = TelemetrySample({"cpu0": 3000.0}, {"soc": 35.0}, "nominal", 0.0)
    flat = [_window(10 * i, 10.0, 3000.0) for i in range(6)]
    slower = [*flat[:3], _window(30, 12.0, 2950.0), _window(40, 12.5, 2950.0), _window(50, 13.0, 2950.0)]
    freq_drop = [*flat[:2], _window(20, 10.0, 2500.0), *flat[3:]]
    hot = [*flat[:4], _window(40, 10.0, 3000.0, "severe"), flat[5]]

    calm = sustained_document(SustainedTrace(60, 10, flat, start))["summary"]
    assert calm["time_to_first_throttle_s"] is None and calm["slowdown"] == pytest.approx(1.0)
    assert calm["span_s"] == 15.0 and calm["inferences"] == 18

    summary = sustained_document(SustainedTrace(60, 10, slower, start))["summary"]
    assert (summary["time_to_first_throttle_s"], summary["throttle_signal"]) == (40, "latency")
    assert summary["steady_p50_ms"] == pytest.approx(13.0) and summary["slowdown"] == pytest.approx(1.3)
    assert (
        sustained_document(SustainedTrace(60, 10, freq_drop, start))["summary"]["throttle_signal"]
        == "frequency"
    )
    assert (
        sustained_document(SustainedTrace(60, 10, hot, start))["summary"]["thermal_status_reached"]
        == "severe"
    )
    assert sustained_document(SustainedTrace(60, 10, hot, start))["summary"]["throttle_signal"] == "thermal"


def test_the_gpu_clock_is_shown_but_is_no_throttle_signal() -> None:
    """Constructed windows (synthetic): a GPU governor idles its clock while a CPU model runs, so
    its fall is reported, never taken for throttling; the fastest domain is the GPU's clock."""
    gpu = {"1f000000.mali": 848.0, "gpu-core": 400.0}
    start = TelemetrySample({"cpu0": 3000.0}, {"soc": 35.0}, "nominal", 0.0, gpu)
    windows = [
        SustainedWindow(
            10 * i, 10 * i + 10, [10.0, 10.0, 10.0], TelemetrySample({"cpu0": 3000.0}, {}, None, None, g)
        )
        for i, g in enumerate([gpu, {"1f000000.mali": 151.0}, {}])
    ]
    document = sustained_document(SustainedTrace(30, 10, windows, start))
    assert [w["gpu_freq_mhz"] for w in document["windows"]] == [848.0, 151.0, None]
    summary = document["summary"]
    assert (summary["start_gpu_freq_mhz"], summary["end_gpu_freq_mhz"]) == (848.0, None)
    assert summary["throttle_signal"] is None


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("10m", 600.0), ("1.5m", 90.0), ("2", 2.0)])
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["10x", "-5s", "0", "m"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration_s(text)


def test_a_bad_sustained_flag_is_one_line(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--sustained", "10x")
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("farm: error: --sustained: '10x' is not a duration")
    assert not home.exists() or not (home / "results.sqlite").exists()


def test_submit_sustained_records_windows_and_warm_start(home: Path, model: Path, ray_session: None) -> None:
    result = farm(
        home, "submit", str(model), "--runs", "5", "--sustained", "2s", "--sustained-window", "0.5", "--json"
    )
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    assert job["warm_load_ms"] > 0 and document["settings"]["sustained_s"] == 2.0
    assert job["warm_load_method"] == "second session in the same process"
    sustained = job["sustained"]
    assert sustained["source"] == "measured" and 3 <= len(sustained["windows"]) <= 5
    assert sum(w["inferences"] for w in sustained["windows"]) == sustained["summary"]["inferences"] > 0
    assert sustained["summary"]["first_p50_ms"] > 0 and sustained["summary"]["steady_p50_ms"] > 0
    shown = farm(home, "show", document["run_id"])
    assert "sustained 2 s (" in shown.stdout and "warm (a second session" in shown.stdout
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ondevice_farm.metrics.collector import FarmCollector, farm_registry

    collector = FarmCollector(home / "results.sqlite")
    try:
        text = generate_latest(farm_registry(collector)).decode()
    finally:
        collector.close()
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert values["farm_session_warm_load_seconds"] == pytest.approx(job["warm_load_ms"] / 1000)
    assert values["farm_sustained_slowdown_ratio"] == pytest.approx(sustained["summary"]["slowdown"])

    import shutil

    from tests.report.chromium import CHROMIUM, open_page

    page = home / "sustained.html"
    assert farm(home, "report", document["run_id"], "--html", str(page)).exit_code == 0
    if shutil.which(CHROMIUM) is None:
        return
    probes = {
        "sections": "Array.from(document.querySelectorAll('section h2')).map(h => h.textContent)",
        "lines": "document.querySelectorAll('#sustained svg polyline').length",
        "points": "document.querySelectorAll('#sustained svg circle').length",
        "warm": "document.querySelector('#sustained table').textContent.includes('load first / warm ms')",
    }
    result = open_page(page, probes)
    assert result.console_errors == []
    assert "Sustained load" in result.values["sections"]
    assert result.values["lines"] == 1 and result.values["points"] == len(sustained["windows"])
    assert result.values["warm"] is True


def test_the_native_runners_battery_power_integrates_to_energy_per_inference() -> None:
    """A sustained section in the native runner's result.json format (constructed: the parser's
    arithmetic only): 1000 mW then 3000 mW over two 1 s windows of 10 inferences each."""
    from ondevice_farm_agents.android.native_sustained import sustained_trace

    def telemetry(power: float | None) -> dict[str, object]:
        return {"cpu_freq_mhz": {"cpu0": 2000.0}, "temperatures_c": {"soc:0": 41.0}, "power_mw": power}

    section = {
        "duration_s": 2,
        "window_s": 1,
        "start": telemetry(1000.0),
        "windows": [
            {"start_s": 0, "end_s": 1, "samples_ms": [10.0] * 10, "telemetry": telemetry(1000.0)},
            {"start_s": 1, "end_s": 2, "samples_ms": [11.0] * 10, "telemetry": telemetry(3000.0)},
        ],
        "unavailable": [],
    }
    summary = sustained_document(sustained_trace(section))["summary"]
    # 1 J in the first second, 2 J (trapezoid 1000 -> 3000 mW) in the second: 3000 mJ / 20
    assert summary["energy_mj_per_inference"] == pytest.approx(150.0)
    section["windows"][1]["telemetry"] = telemetry(None)  # one unreadable sample: no energy at all
    assert sustained_document(sustained_trace(section))["summary"]["energy_mj_per_inference"] is None
