"""`farm submit` and `farm show` on an 80-column terminal: every cell whole (no '…'), no line
past the edge; `--wide` keeps the full table; the slowest kernels name their source nodes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ondevice_farm.reports.kernel_sources import kernel_sources_of

from .conftest import TINYNET, HostRuns, farm

NARROW = "80"


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _assert_readable(stdout: str, job: dict[str, object]) -> None:
    assert "…" not in stdout
    too_long = [line for line in _lines(stdout) if len(line) > int(NARROW)]
    assert too_long == []
    latency = job["latency_ms"]
    assert isinstance(latency, dict)
    for value in (latency["p50"], latency["p90"], latency["p99"]):
        shown = f"{value:.3f}" if value < 10 else f"{value:.1f}"
        assert shown in stdout
    for header in ("p50 ms", "p99 ms", "load ms", "peak MB", "SNR dB", "max |err|", "ref"):
        assert header in stdout


def test_show_at_80_columns(host_runs: HostRuns, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", NARROW)
    done = farm(host_runs.home, "show", host_runs.first["run_id"])
    assert done.returncode == 0, done.stderr
    _assert_readable(done.stdout, host_runs.first["jobs"][0])
    assert "{" not in done.stdout  # no raw Python dicts


def test_submit_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", NARROW)
    home = tmp_path / "home"
    done = farm(home, "submit", str(TINYNET), "-d", "host-cpu", "-n", "5", timeout_s=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "…" not in done.stdout
    assert [line for line in _lines(done.stdout) if len(line) > int(NARROW)] == []
    for header in ("p50 ms", "SNR dB", "max |err|", "Slowest ops", "source nodes"):
        assert header in done.stdout


def test_wide_keeps_one_table(host_runs: HostRuns, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", NARROW)
    done = farm(host_runs.home, "show", host_runs.first["run_id"], "--wide")
    assert done.returncode == 0, done.stderr
    header = next(line for line in _lines(done.stdout) if "p50 ms" in line)
    assert "max |err|" in header and "device" in header


def test_slowest_kernels_name_their_source_nodes(host_runs: HostRuns) -> None:
    document = host_runs.first
    sources = kernel_sources_of(document)
    assert sources is not None
    job_sources = sources[0]
    nchwc = [op for op in document["jobs"][0]["ops"] if op["name"].endswith(".out_nchwc")]
    assert nchwc, "ORT on x86 runs its Convs as NCHWc kernels"
    for op in nchwc:
        nodes = job_sources[op["name"]]
        # named after the last node it absorbed; the Conv it ran is among its sources
        assert nodes[-1] == op["name"].removesuffix(".out_nchwc")
        assert any(re.fullmatch(r"Conv_\d+", n) for n in nodes), (op["name"], nodes)
