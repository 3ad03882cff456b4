"""The session-level regression test, error control across a suite, and the verdict's evidence."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from ondevice_farm.analysis.multiple import benjamini_hochberg
from ondevice_farm.analysis.regression import RegressionPolicy, compare_latency
from ondevice_farm.analysis.session_test import NotComparable, compare_sessions
from ondevice_farm.analysis.sessions import sessions_document
from ondevice_farm.analysis.spread import spread_warnings
from ondevice_farm.analysis.student_t import t_quantile, t_sf
from ondevice_farm.nightly.compare import compare_runs
from ondevice_farm.nightly.html import render_nightly
from ondevice_farm.nightly.report import print_comparison


def test_student_t_matches_printed_tables() -> None:
    # two-sided 5% at 8 df, one-sided 0.05% at 30 df (any statistics table)
    assert t_quantile(0.975, 8) == pytest.approx(2.306, abs=1e-3)
    assert t_sf(3.646, 30) == pytest.approx(0.0005, rel=1e-3)
    assert t_sf(-1.0, 1) == pytest.approx(0.75)


def test_benjamini_hochberg_adjusts_by_rank() -> None:
    adjusted = benjamini_hochberg([0.01, 0.04, 0.03, 0.5])
    assert adjusted == pytest.approx([0.04, 0.0533333, 0.0533333, 0.5], rel=1e-5)
    assert benjamini_hochberg([]) == []


def sessions(level: float, k: int, rng: np.random.Generator, sd: float = 0.01) -> list[float]:
    return [float(v) for v in level * np.exp(rng.normal(0.0, sd, k))]


def test_a_session_level_shift_the_sample_test_calls_certain_is_not_a_regression() -> None:
    """The issue's A/A case: two sessions of one model differ by their thread placement; within
    each, 30 samples agree tightly, so a test on samples calls it certain."""
    rng = np.random.default_rng(3)
    fast = [float(v) for v in 5.5 * rng.lognormal(0, 0.02, 30)]
    slow = [float(v) for v in 6.0 * rng.lognormal(0, 0.02, 30)]
    assert compare_latency(fast, slow).regressed  # the diagnostic is fooled
    # as sessions: each run saw both placements
    history = [[5.5, 6.0, 5.6, 5.9, 5.5] for _ in range(4)]
    verdict = compare_sessions(history, [6.0, 5.5, 5.9, 6.0, 5.6])
    assert verdict.p_slower > 0.05 and verdict.ci_low < 1.0 < verdict.ci_high


def test_a_real_slowdown_is_found_with_its_interval() -> None:
    rng = np.random.default_rng(4)
    history = [sessions(10.0, 5, rng) for _ in range(6)]
    verdict = compare_sessions(history, sessions(11.0, 5, rng))
    assert verdict.p_slower < 1e-4 and 1.05 < verdict.ci_low < verdict.ratio < verdict.ci_high < 1.15
    assert verdict.history_runs == 6 and verdict.drift_from == "history"
    assert verdict.to_dict()["change_pct"] == pytest.approx((verdict.ratio - 1) * 100)


def test_one_session_each_without_history_cannot_be_compared() -> None:
    with pytest.raises(NotComparable, match="one session each"):
        compare_sessions([[10.0]], [11.0])


def test_drift_in_the_history_widens_the_interval() -> None:
    rng = np.random.default_rng(5)
    steady = [sessions(10.0, 5, rng) for _ in range(8)]
    drifting = [sessions(10.0 * f, 5, rng) for f in (1.0, 1.12, 0.92, 1.1, 0.95, 1.08, 0.9, 1.0)]
    new = sessions(10.8, 5, rng)
    calm, noisy = compare_sessions(steady, new), compare_sessions(drifting, new)
    assert calm.p_slower < 1e-3 < noisy.p_slower
    assert noisy.ci_high - noisy.ci_low > 3 * (calm.ci_high - calm.ci_low)


def latency(p50s: list[float]) -> dict[str, Any]:
    return sessions_document([[v * f for f in (0.98, 1.0, 1.03)] for v in p50s])


def job(model: str, p50s: list[float] | None, run_id: str = "r", status: str = "ok") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "run_id": run_id,
        "model": {"name": model},
        "device": "host-cpu",
        "requested": "host-cpu",
        "target": "ort/cpu",
        "status": status,
    }
    if status == "ok":
        doc["latency_ms"] = latency(p50s or [])
    else:
        doc["error"] = "the unit disconnected"
    return doc


def suite_history(models: list[str], nights: int, rng: np.random.Generator) -> dict[Any, Any]:
    return {
        (m, "host-cpu", "ort/cpu"): [(f"n{n}", job(m, sessions(2.0, 5, rng), f"n{n}")) for n in range(nights)]
        for m in models
    }


def test_an_unchanged_suite_of_a_hundred_jobs_passes_and_one_slowed_job_is_caught() -> None:
    rng = np.random.default_rng(6)
    models = [f"m{i:03d}" for i in range(100)]
    series = suite_history(models, 6, rng)
    unchanged = [job(m, sessions(2.0, 5, rng), "new") for m in models]
    comparison = compare_runs(unchanged, series, RegressionPolicy())
    assert comparison.regressions == []
    assert {j.verdict for j in comparison.jobs} == {"unchanged"}
    slowed = [*unchanged[:-1], job(models[-1], sessions(2.2, 5, rng), "new")]
    comparison = compare_runs(slowed, series, RegressionPolicy())
    (flagged,) = comparison.regressions
    assert flagged.key[0] == models[-1] and flagged.verdict == "regressed"
    evidence = flagged.to_dict()["latency"]
    assert evidence["baseline_p50"] == pytest.approx(2.0, rel=0.05)
    assert 8 < evidence["change_pct"] < 12 and evidence["p_adjusted"] <= 0.01
    assert evidence["p_adjusted"] >= evidence["p_slower"]


def test_each_job_is_compared_with_its_own_last_success() -> None:
    rng = np.random.default_rng(7)
    series = suite_history(["a", "b"], 4, rng)
    # b failed in the last night: its baseline stays n3 for a, n2 for b
    series[("b", "host-cpu", "ort/cpu")] = series[("b", "host-cpu", "ort/cpu")][:3]
    previous = [job("a", [2.0], "n3"), job("b", None, "n3", status="failed")]
    now = [job("a", sessions(2.0, 5, rng), "n4"), job("b", sessions(2.0, 5, rng), "n4")]
    comparison = compare_runs(now, series, RegressionPolicy(), previous=previous)
    by_model = {j.key[0]: j for j in comparison.jobs}
    assert by_model["a"].baseline_run == "n3" and by_model["b"].baseline_run == "n2"
    assert all(j.latency is not None for j in comparison.jobs)


def test_why_a_job_was_not_compared_is_said() -> None:
    rng = np.random.default_rng(8)
    series = suite_history(["old"], 1, rng)
    no_samples = job("old", [2.0], "new")
    no_samples["latency_ms"] = {"p50": None, "samples": []}
    comparison = compare_runs([no_samples, job("fresh", [2.0, 2.1], "new")], series, RegressionPolicy())
    reasons = {j.key[0]: (j.verdict, j.reason) for j in comparison.jobs}
    assert reasons["old"] == ("not compared", "no samples")
    assert reasons["fresh"][0] == "not compared" and reasons["fresh"][1].startswith("no history")
    pinned = compare_runs(
        [job("old", [2.0, 2.1], "new")],
        series,
        RegressionPolicy(),
        pinned_run="p",
        pinned_jobs=[job("old", None, "p", status="failed")],
    )
    assert pinned.jobs[0].reason == "baseline failed" and pinned.jobs[0].verdict == "not compared"
    # a short history: the numbers, but no verdict until the drift is estimated
    short = compare_runs([job("old", sessions(2.0, 5, rng), "new")], series, RegressionPolicy())
    (entry,) = short.jobs
    assert (
        entry.latency is not None and entry.verdict == "not compared" and "history of 1 run" in entry.reason
    )


def test_the_terminal_verdict_fits_80_columns_and_shows_the_numbers() -> None:
    rng = np.random.default_rng(9)
    models = ["tiny_transformer_ffn_with_a_long_name", "b"]
    series = suite_history(models, 5, rng)
    now = [job(models[0], sessions(2.4, 5, rng), "new"), job("b", sessions(2.0, 5, rng), "new")]
    comparison = compare_runs(now, series, RegressionPolicy())
    out = io.StringIO()
    print_comparison(comparison, Console(file=out, width=80, color_system=None))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if line.startswith("tiny_transformer"))
    slowed = comparison.jobs[1] if comparison.jobs[1].key[0] == models[0] else comparison.jobs[0]
    assert slowed.latency is not None
    change = f"{(slowed.latency.ratio - 1) * 100:+.1f}%"
    assert "regressed" in row and change in row and f"{slowed.latency.ci_low:.2f}-" in row
    assert not any(line.lstrip().startswith(";") for line in lines)
    counts = {"total": len(now), "ok": sum(1 for j in now if j["status"] == "ok")}
    run = {"suite": "s", "run_id": "new", "status": "complete", "job_counts": counts}
    page = render_nightly(run, comparison)
    assert "regressed" in page and "adjusted p" in page and f"{slowed.latency.new_p50:.4g}" in page


def test_sessions_make_the_headline_and_the_spread_of_a_job() -> None:
    document = sessions_document([[5.0, 5.1, 5.2], [8.0, 8.1, 7.9]])
    assert document["p50"] == pytest.approx(np.sqrt(5.1 * 8.0))
    assert [r["p50"] for r in document["repeats"]] == [5.1, 8.0] and len(document["samples"]) == 6
    assert document["spread"]["sessions"] == 2 and document["spread"]["between_session"] > 0.3
    assert document["percentile_method"] == "linear"
    assert any("sessions disagree" in w for w in spread_warnings(document))


def test_one_outlier_does_not_raise_a_spread_warning() -> None:
    steady = [float(v) for v in np.full(30, 5.0) + np.linspace(-0.05, 0.05, 30)]
    document = sessions_document([[*steady[:-1], 60.0]])
    assert document["cv"] > 0.5  # the old warning fired on this
    assert spread_warnings(document) == []


def rich_job(
    model: str, p50s: list[float], run_id: str, *, snr: float, fallbacks: list[str], fused: int
) -> dict[str, Any]:
    """A job with what the numeric and placement findings and the diagnostic read, and more
    they do not (as a stored summary has)."""
    doc = job(model, p50s, run_id)
    doc["latency_ms"]["samples"] = [v * f for v in p50s for f in (0.98, 1.0, 1.03)]
    doc["reference"] = {
        "status": "passed", "passed": True, "tolerance": {"snr_db_min": 30.0},
        "outputs": {"y": {"snr_db": snr, "passed": True, "max_abs": 1e-3}},
    }  # fmt: skip
    doc["fallback_ops"] = [
        {"name": n, "op_type": "Erf", "provider": "CPUExecutionProvider"} for n in fallbacks
    ]
    doc["compile"] = {"fusions": [{"op_type": "Gelu", "before": 3, "after": fused}], "provider": "x"}
    doc["transfers"] = [{"from": "cpu", "to": "npu", "bytes": 4096}] * 20
    doc["artifact_sha256"], doc["duration_s"] = "ab" * 32, 1.5
    return doc


def test_the_nightlys_kept_views_give_the_verdicts_the_whole_summaries_give() -> None:
    """What load_history keeps of a job (its baseline's verdict inputs, older nights' session p50s:
    nightly/verdict_inputs.py) judges tonight exactly as the stored summaries themselves do."""
    from ondevice_farm.nightly.verdict_inputs import history_point, verdict_view

    rng = np.random.default_rng(11)
    models = ["steady", "slowed", "lost_fusion", "new_fallback", "snr_drop"]
    full = {
        (m, "host-cpu", "ort/cpu"): [
            (f"n{n}", rich_job(m, sessions(2.0, 5, rng), f"n{n}", snr=60.0, fallbacks=["erf_1"], fused=2))
            for n in range(5)
        ]
        for m in models
    }
    tonight = {
        "steady": dict(snr=60.0, fallbacks=["erf_1"], fused=2),
        "slowed": dict(snr=60.0, fallbacks=["erf_1"], fused=2),
        "lost_fusion": dict(snr=60.0, fallbacks=["erf_1"], fused=1),
        "new_fallback": dict(snr=60.0, fallbacks=["erf_1", "erf_2"], fused=2),
        "snr_drop": dict(snr=40.0, fallbacks=["erf_1"], fused=2),
    }
    now = [
        rich_job(m, sessions(2.3 if m == "slowed" else 2.0, 5, rng), "n5", **kw)  # type: ignore[arg-type]
        for m, kw in tonight.items()
    ]
    previous = [runs[-1][1] for runs in full.values()]
    kept = {
        key: [(r, history_point(j)) for r, j in runs[:-1]] + [(runs[-1][0], verdict_view(runs[-1][1]))]
        for key, runs in full.items()
    }
    whole = compare_runs(now, full, RegressionPolicy(), previous=previous)
    slim = compare_runs(now, kept, RegressionPolicy(), previous=[history_point(j) for j in previous])
    assert slim.to_dict() == whole.to_dict()
    verdicts = {j.key[0]: (j.verdict, sorted(f.kind for f in j.findings)) for j in slim.jobs}
    assert verdicts == {
        "steady": ("unchanged", []),
        "slowed": ("regressed", ["latency"]),
        "lost_fusion": ("regressed", ["placement"]),
        "new_fallback": ("regressed", ["placement"]),
        "snr_drop": ("regressed", ["numeric"]),
    }
    # a baseline with nothing but its p50s would miss the numeric and placement findings
    bare = {key: [(r, history_point(j)) for r, j in runs] for key, runs in full.items()}
    assert compare_runs(now, bare, RegressionPolicy()).to_dict() != whole.to_dict()
