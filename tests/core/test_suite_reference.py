"""A suite's `reference:` and `tolerance:` reach each model's submission, checked on load."""

from __future__ import annotations

from pathlib import Path

import pytest

from ondevice_farm.analysis.tolerance import DEFAULT_TOLERANCES
from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.run import requests_for
from ondevice_farm.nightly.suite import load_suite


def test_reference_and_tolerance_per_model_on_top_of_the_suite(tmp_path: Path) -> None:
    suite_path = tmp_path / "suite.yaml"
    suite_path.write_text(
        "name: q\ndevices: [host-cpu]\ntolerance: ['atol=1e-4', 'int8:snr_db=25']\nmodels:\n"
        "  - path: m_int8.onnx\n    reference: m.onnx\n    tolerance: int8:snr_db=15,cosine=0.98\n"
        "  - m.onnx\n"
    )
    quantised, plain = requests_for(load_suite(suite_path))
    assert quantised.reference_model == tmp_path / "m.onnx" and plain.reference_model is None
    assert quantised.tolerance is not None and plain.tolerance is not None
    int8 = quantised.tolerance.apply(DEFAULT_TOLERANCES["int8"])  # type: ignore[union-attr]
    assert (int8.atol, int8.snr_db_min, int8.cosine_min, int8.source) == (1e-4, 15.0, 0.98, "suite")
    assert plain.tolerance.apply(DEFAULT_TOLERANCES["int8"]).snr_db_min == 25.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("tolerance: snr=1", "models[0].tolerance 'snr=1': use [PRECISION:]KEY=VALUE"),
        ("tolerance: {atol: 1}", "models[0].tolerance must be a string"),
        ("reference: [a.onnx]", "models[0].reference must be the path of a model"),
    ],
)
def test_bad_reference_or_tolerance_names_the_file_and_field(
    tmp_path: Path, entry: str, message: str
) -> None:
    suite_path = tmp_path / "suite.yaml"
    suite_path.write_text(f"name: q\ndevices: [host-cpu]\nmodels:\n  - path: m.onnx\n    {entry}\n")
    with pytest.raises(UsageError) as caught:
        load_suite(suite_path)
    assert message in str(caught.value) and str(caught.value).startswith(str(suite_path))
