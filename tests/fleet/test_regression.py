"""The regression test on latency samples, numerics and placement, and nightly suite files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.analysis.regression import RegressionPolicy, compare_jobs, compare_latency
from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.suite import load_suite


def samples(median: float, n: int, seed: int, sigma: float = 0.05) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in median * rng.lognormal(0.0, sigma, n)]


def test_a_clear_slowdown_is_a_regression() -> None:
    verdict = compare_latency(samples(10.0, 30, 1), samples(12.0, 30, 2))
    assert verdict.regressed and not verdict.improved
    assert 1.15 < verdict.ratio < 1.25 and verdict.ci_low > 1.0


def test_a_speedup_is_an_improvement_not_a_regression() -> None:
    verdict = compare_latency(samples(10.0, 30, 1), samples(8.0, 30, 2))
    assert verdict.improved and not verdict.regressed


def test_a_significant_slowdown_below_the_minimum_effect_is_not_flagged() -> None:
    verdict = compare_latency(samples(10.0, 200, 1, 0.01), samples(10.3, 200, 2, 0.01))
    assert verdict.p_slower < 1e-6 and verdict.ci_low > 1.0
    assert not verdict.regressed


def test_noise_alone_is_not_flagged() -> None:
    flagged = sum(
        compare_latency(samples(10.0, 20, s, 0.2), samples(10.0, 20, s + 1000, 0.2)).regressed
        for s in range(200)
    )
    assert flagged <= 2


def jobs(
    base_snr: float,
    new_snr: float,
    *,
    new_passed: bool = True,
    new_fallbacks: tuple[str, ...] = (),
    new_fusions: int = 2,
) -> tuple[dict, dict]:
    def job(snr: float, passed: bool, fallbacks: tuple[str, ...], fusions: int) -> dict:
        return {
            "latency_ms": {"samples": samples(5.0, 10, int(snr))},
            "reference": {
                "passed": passed,
                "tolerance": {"snr_db_min": 30.0},
                "outputs": {"y": {"snr_db": snr}},
            },
            "fallback_ops": [{"name": n} for n in fallbacks],
            "compile": {"fusions": [{"op_type": "FusedConv", "before": 0, "after": fusions}]},
        }

    return job(base_snr, True, (), 2), job(new_snr, new_passed, new_fallbacks, new_fusions)


def test_numeric_and_placement_regressions_are_found() -> None:
    base, new = jobs(80.0, 40.0, new_passed=False, new_fallbacks=("conv_3",), new_fusions=1)
    kinds = sorted((f.kind, f.message.split(" ")[0]) for f in compare_jobs(base, new) if f.regression)
    assert kinds == [("numeric", "SNR"), ("numeric", "the"), ("placement", "1"), ("placement", "fusions")]


def test_an_unchanged_job_has_no_findings() -> None:
    base, new = jobs(80.0, 79.0)
    new["latency_ms"] = base["latency_ms"]
    assert compare_jobs(base, new, RegressionPolicy()) == []


def test_a_suite_file_is_loaded_with_defaults_and_paths_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    suite_path = tmp_path / "suite.yaml"
    suite_path.write_text(
        "name: mobile\ndevices: [pixel8, iphone15]\nruns: 20\nmodels:\n"
        "  - models/a.onnx\n  - path: models/b.onnx\n    devices: host-cpu\n    targets: [ort/cpu]\n"
        "    repeats: 3\n"
        "    shapes: {x: [1, 3, 8, 8]}\nregression: {min_effect: 0.1}\n"
    )
    suite = load_suite(suite_path)
    assert suite.name == "mobile" and suite.policy.min_effect == 0.1
    a, b = suite.models
    assert a.path == tmp_path / "models" / "a.onnx" and a.devices == ("pixel8", "iphone15") and a.runs == 20
    assert b.devices == ("host-cpu",) and [t.name for t in b.targets or ()] == ["ort/cpu"]
    assert b.shapes == {"x": (1, 3, 8, 8)}
    assert (a.repeats, b.repeats) == (5, 3)  # the suite default, and the model's own


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models: [a.onnx]\ndevices: [pixel8]\n", "missing 'name'"),
        ("name: s\nmodels: [a.onnx]\n", "no devices"),
        ("name: s\ndevices: [pixel8]\nmodels: [a.onnx]\nrunz: 3\n", "unknown field 'runz'"),
        ("name: s\ndevices: [pixel8]\nruns: 0\nmodels: [a.onnx]\n", "runs must be at least 1"),
        ("name: s\ndevices: [pixel8]\nrepeats: 0\nmodels: [a.onnx]\n", "repeats must be at least 1"),
        ("name: s\ndevices: [pixel8]\ntargets: [ort/gpu9]\nmodels: [a.onnx]\n", "unknown target"),
    ],
)
def test_a_bad_suite_names_its_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message) as info:
        load_suite(path)
    assert str(path) in str(info.value)


def test_run_to_run_drift_in_the_history_raises_the_bar() -> None:
    base, new = samples(10.0, 30, 1), samples(11.5, 30, 2)
    assert compare_latency(base, new).regressed
    steady = [10.0, 10.1, 9.9, 10.0, 10.05]
    drifting = [10.0, 11.4, 9.8, 11.6, 10.1]
    assert compare_latency(base, new, history=steady).regressed
    verdict = compare_latency(base, new, history=drifting)
    assert not verdict.regressed and verdict.noise_floor is not None and verdict.noise_floor > 1.15
